//! What one run measured, and the table it prints.

use std::time::Duration;

use super::cluster_ips::Allocations;
use super::machine::Split;
use super::operators::Operator;
use super::process::Usage;
use super::ready_lag::ReadyLag;
use super::ready_waits::ReadyWaits;
use crate::audit::Requests;

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub operator: Operator,
    pub clusters: usize,
    pub namespaces: usize,
    /// Apply of the first cluster → every cluster's children exist.
    pub children_created: Option<Duration>,
    /// The machine's cores from the apply until then: busy or waiting, and whose work.
    pub children_cores: Split,
    /// The API server's ClusterIP allocations up to then (its own log): one lock for them all.
    pub cluster_ips: Option<Allocations>,
    /// Apply of the first cluster → every cluster ready in the operator's own terms, if that
    /// happened within `ready_timeout`.
    pub all_ready: Option<Duration>,
    pub ready_timeout: Duration,
    /// The census (clusters by phase, children) once every one was ready or the ready timeout
    /// passed.
    pub reached: String,
    /// The machine's cores from the apply until every cluster was ready (or the timeout).
    pub ready_cores: Split,
    /// Tusk's queue until every cluster was Ready (None for a peer, or not all Ready).
    pub queue: Option<Queue>,
    /// The census once the restarted operator had been through every cluster.
    pub after_restart: String,
    /// The operator's requests from the first apply until every cluster was ready (or the
    /// ready timeout).
    pub converge_requests: Requests,
    /// Usage once every cluster was ready or the ready timeout passed (the peak covers the
    /// whole convergence).
    pub converged: Usage,
    /// The rest window and the requests made in it.
    pub rest: Duration,
    pub rest_requests: Requests,
    /// Usage at the end of the rest window.
    pub settled: Usage,
    /// Restart at rest: start → every cluster reconciled once, and the writes made meanwhile.
    pub restart_settled: Duration,
    /// What `restart_settled` waited for (operators.rs, Settled::meaning).
    pub restart_meaning: &'static str,
    pub restart_requests: Requests,
    /// How long after the restart `restarted` was read.
    pub restart_wait: Duration,
    /// Usage `restart_wait` after the restart (its peak is the restart's burst).
    pub restarted: Usage,
    /// Deleting every cluster → none left (the operator's part: its finalizers, if any).
    pub clusters_deleted: Duration,
    /// Deleting every cluster → no child left (kube-controller-manager's garbage collector
    /// deletes owned children; Zalando's operator deletes its own, which it does not own), if
    /// that happened within `delete_timeout`.
    pub all_deleted: Option<Duration>,
    pub delete_timeout: Duration,
    /// The census when the delete's wait ended (what was left, if it timed out).
    pub left_after_delete: String,
    /// A restart while this many more clusters were being created: start → as many clusters
    /// reconciled as had converged.
    pub backlog: Option<(usize, Duration)>,
}

/// Tusk's reconciles to converge and how long a cluster waited once its pods were Ready.
#[derive(Debug, Clone)]
pub struct Queue {
    pub reconciles: f64,
    pub lag: ReadyLag,
    /// The lag taken apart: the pod's status landing, the StatefulSet's status, the operator.
    pub waits: ReadyWaits,
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn per_minute(count: u64, window: Duration) -> String {
    let minutes = window.as_secs_f64() / 60.0;
    if minutes == 0.0 {
        return "-".into();
    }
    format!("{:.1}", count as f64 / minutes)
}

impl Report {
    /// A Markdown table, one measure a row, of the operator's `build` (Tusk: release or debug;
    /// a peer: its version).
    pub fn table(&self, build: &str) -> String {
        let ready = match self.all_ready {
            Some(ready) => secs(ready),
            None => format!("not within {}", secs(self.ready_timeout)),
        };
        let behind = self.backlog.map(|(m, took)| {
            (
                "restart behind a backlog of new clusters: as many reconciled as had converged",
                format!("{} ({m} new clusters being created)", secs(took)),
            )
        });
        let rows = [
            (
                "apply → every cluster's children created",
                self.children_created
                    .map_or_else(|| format!("not within {}", secs(self.ready_timeout)), secs),
            ),
            (
                "ClusterIPs allocated by the API server until then",
                self.cluster_ips
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), ToString::to_string),
            ),
            (
                "the machine's cores until then",
                self.children_cores.to_string(),
            ),
            ("apply → every cluster ready (operator's own terms)", ready),
            (
                "the machine's cores until then",
                self.ready_cores.to_string(),
            ),
            ("clusters at ready (or its timeout)", self.reached.clone()),
            (
                "reconciles to converge (Tusk's counter)",
                self.queue
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |q| format!("{:.0}", q.reconciles)),
            ),
            (
                "a cluster Ready after its pods (Ready transition times)",
                self.queue
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |q| q.lag.to_string()),
            ),
            (
                "where a cluster's Ready waited (audit log: after its pod's stamp)",
                self.queue
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |q| q.waits.to_string()),
            ),
            (
                "requests to converge (reads / writes)",
                format!(
                    "{} / {}",
                    self.converge_requests.reads, self.converge_requests.writes
                ),
            ),
            (
                "RSS peak (whole run up to ready)",
                mib(self.converged.peak_kib),
            ),
            (
                "RSS settled (end of rest)",
                format!(
                    "{} (heap and stacks {}, the rest mapped code)",
                    mib(self.settled.rss_kib),
                    mib(self.settled.anon_kib)
                ),
            ),
            (
                "CPU seconds to converge / during rest",
                format!(
                    "{:.1} / {:.1}",
                    self.converged.cpu_seconds,
                    self.settled.cpu_seconds - self.converged.cpu_seconds
                ),
            ),
            (
                "requests per minute at rest (reads / writes)",
                format!(
                    "{} / {} (over {})",
                    per_minute(self.rest_requests.reads, self.rest),
                    per_minute(self.rest_requests.writes, self.rest),
                    secs(self.rest)
                ),
            ),
            (
                "restart at rest: settled after",
                format!("{} ({})", secs(self.restart_settled), self.restart_meaning),
            ),
            (
                "restart at rest: requests (reads / writes)",
                format!(
                    "{} / {}",
                    self.restart_requests.reads, self.restart_requests.writes
                ),
            ),
            ("clusters after the restart", self.after_restart.clone()),
            (
                "restart: RSS peak / later",
                format!(
                    "{} / {} ({} later)",
                    mib(self.restarted.peak_kib),
                    mib(self.restarted.rss_kib),
                    secs(self.restart_wait)
                ),
            ),
            (
                "delete all → every cluster resource gone",
                secs(self.clusters_deleted),
            ),
            (
                "delete all → every child gone",
                self.all_deleted.map_or_else(
                    || {
                        format!(
                            "not within {}: {}",
                            secs(self.delete_timeout),
                            self.left_after_delete
                        )
                    },
                    secs,
                ),
            ),
        ];
        let who = match self.operator {
            Operator::Tusk => format!("Tusk ({build} build)"),
            peer => format!("{} {build}", peer.name()),
        };
        let mut out = format!(
            "| {who}, {} clusters in {} namespace(s) | |\n|---|---|\n",
            self.clusters, self.namespaces
        );
        for (measure, value) in rows.into_iter().chain(behind) {
            out.push_str(&format!("| {measure} | {value} |\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_each_measure_with_its_unit() {
        let report = Report {
            operator: Operator::Tusk,
            clusters: 100,
            namespaces: 1,
            children_created: Some(Duration::from_millis(4_800)),
            cluster_ips: Some(Allocations {
                count: 301,
                span: 10.0,
                gaps_ms: [19.0, 31.0, 80.0],
            }),
            converged: Usage {
                rss_kib: 30_000,
                peak_kib: 40_960,
                anon_kib: 18_000,
                cpu_seconds: 3.0,
            },
            settled: Usage {
                rss_kib: 32_768,
                peak_kib: 40_960,
                anon_kib: 20_480,
                cpu_seconds: 3.5,
            },
            rest: Duration::from_secs(120),
            rest_requests: Requests {
                reads: 4,
                writes: 0,
            },
            ready_timeout: Duration::from_secs(60),
            delete_timeout: Duration::from_secs(600),
            left_after_delete: "0 clusters (), 4100 Secrets".into(),
            backlog: Some((1000, Duration::from_millis(3_250))),
            queue: Some(Queue {
                reconciles: 412.0,
                lag: ReadyLag::of([(10, 12), (10, 10)]),
                waits: ReadyWaits::default(),
            }),
            children_cores: Split {
                wall_seconds: 4.8,
                busy: 0.97,
                processes: vec![("kube-apiserver".into(), 5.1), ("operator".into(), 2.0)],
            },
            ..Report::default()
        };
        let table = report.table("release");
        assert!(table.starts_with("| Tusk (release build), 100 clusters in 1 namespace(s) |"));
        for row in [
            "| apply → every cluster's children created | 4.8 s |",
            "| ClusterIPs allocated by the API server until then | 301 in 10.0 s, 30.0 a second; gaps p10 19 / p50 31 / p90 80 ms |",
            "| the machine's cores until then | machine 97 % busy over 5 s; CPU s: kube-apiserver 5.1, operator 2.0 |",
            "| RSS peak (whole run up to ready) | 40.0 MiB |",
            "| apply → every cluster ready (operator's own terms) | not within 60.0 s |",
            "| RSS settled (end of rest) | 32.0 MiB (heap and stacks 20.0 MiB, the rest mapped code) |",
            "| CPU seconds to converge / during rest | 3.0 / 0.5 |",
            "| reconciles to converge (Tusk's counter) | 412 |",
            "| a cluster Ready after its pods (Ready transition times) | p50 0 s, p90 2 s, max 2 s (2 clusters) |",
            "| where a cluster's Ready waited (audit log: after its pod's stamp) | no cluster with every write in the audit log |",
            "| requests per minute at rest (reads / writes) | 2.0 / 0.0 (over 120.0 s) |",
            "| delete all → every child gone | not within 600.0 s: 0 clusters (), 4100 Secrets |",
            "| restart behind a backlog of new clusters: as many reconciled as had converged | 3.2 s (1000 new clusters being created) |",
        ] {
            assert!(table.contains(row), "{row} in\n{table}");
        }
    }
}
