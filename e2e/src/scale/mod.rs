//! The scale benchmark (`tusk-scale`, run by scripts/bench-scale.sh): N clusters applied at
//! once to the local control plane (kwok plays the nodes), the operator — Tusk or a peer
//! (operators.rs) — measured from outside —
//! its process in /proc, its requests in the API server's audit log, what exists through
//! watches — through convergence, a rest window, a restart at rest, and deleting everything.

pub mod census;
pub mod cluster_ips;
pub mod fleet;
pub mod machine;
pub mod operators;
pub mod process;
pub mod ready_lag;
pub mod ready_waits;
pub mod report;
pub mod standin;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;

use crate::audit::{self, Requests};
use crate::platform::Local;
use crate::{Context, Result, fail, metrics, say};
use census::Census;
use fleet::Fleet;
use operators::{Operator, Settled};
use report::Report;

/// How long after a restart its resident memory is read (no longer than the rest window: a
/// short run, as CI's, proves the benchmark works and need not wait for the figure).
const AFTER_RESTART: Duration = Duration::from_secs(90);

/// How often a long wait says how far the run has got.
const PROGRESS_EVERY: Duration = Duration::from_secs(60);

/// One benchmark run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub operator: Operator,
    pub fleet: Fleet,
    /// How long the operator is watched at rest.
    pub rest: Duration,
    /// The longest any phase may take before the run fails.
    pub timeout: Duration,
    /// How long to wait for every cluster to be ready before reporting how far they got (a
    /// peer on kwok may never get there).
    pub ready_timeout: Duration,
    /// How long to wait for every child to be gone after the delete before reporting what is
    /// left: at 10,000 clusters kube-controller-manager's garbage collector, at its default 20
    /// requests a second, takes hours over ~200,000 children, none of it the operator's work.
    pub delete_timeout: Duration,
    /// Clusters applied after the restart at rest, for a restart while they are created.
    pub backlog: usize,
}

/// The local control plane and operator (e2e/local/up.sh, operator.sh, peer.sh) in `dir`.
pub struct Stand {
    pub client: Client,
    pub operator: Local,
    pub under_test: Operator,
    pub dir: PathBuf,
}

impl Stand {
    fn audit_log(&self) -> PathBuf {
        self.dir.join("logs/audit.log")
    }

    fn pid(&self) -> Result<u32> {
        let file = self.dir.join("pids/operator.pid");
        let text = std::fs::read_to_string(&file).context(file.display())?;
        text.trim()
            .parse()
            .context(format!("{}: {text:?}", file.display()))
    }

    fn usage(&self) -> Result<process::Usage> {
        process::usage(self.pid()?)
    }

    fn requests_since(&self, mark: u64) -> Result<Requests> {
        audit::requests_of_since(&self.audit_log(), self.under_test.user(), mark)
    }

    fn operator_log(&self) -> PathBuf {
        self.dir.join("logs/operator.log")
    }

    /// Runs the script that manages the operator's process (kill, start).
    async fn script(&self, command: &str) -> Result {
        let (script, args) = self.under_test.script();
        let script = crate::testbin::repo().join("e2e/local").join(script);
        let out = tokio::process::Command::new(&script)
            .args(args)
            .arg(command)
            .output()
            .await
            .context(format!("running {}", script.display()))?;
        if !out.status.success() {
            fail!(
                "{} {args:?} {command} failed ({}): {}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    fn mark(&self) -> Result<u64> {
        audit::mark(&self.audit_log())
    }
}

/// Runs `plan` on `stand`; every cluster it applies is deleted again at the end.
pub async fn run(stand: &Stand, plan: &Plan) -> Result<Report> {
    let op = plan.operator;
    plan.fleet.prepare(&stand.client, plan.backlog).await?;
    let mut census = Census::start(&stand.client, op).await?;
    if census.look().clusters > 0 {
        fail!("the control plane already has clusters: {}", census.look());
    }
    census.report_every(PROGRESS_EVERY, machine::progress(stand.dir.clone()));
    let standin = standin::start(&stand.client, op);
    let report = measure(stand, plan, &census).await;
    if let Some(standin) = standin {
        standin.abort();
    }
    report
}

async fn measure(stand: &Stand, plan: &Plan, census: &Census) -> Result<Report> {
    let (n, timeout, op) = (plan.fleet.clusters, plan.timeout, plan.operator);
    let mark = stand.mark()?;
    let cores_at_apply = machine::Reading::now(&stand.dir)?;
    let start = Instant::now();
    plan.fleet.apply(&stand.client, op).await?;
    let services = match plan.fleet.only_rw {
        true => " (client Services: -rw only)",
        false => "",
    };
    say(format!(
        "applied {n} clusters{services} in {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    // Tusk must get there (the run fails otherwise); a peer on kwok may not, and is reported
    // with how far it got by the ready timeout.
    let must = op == Operator::Tusk;
    let children_created = reached(
        census
            .until("every cluster's children", start, plan.ready_timeout, |c| {
                c.children_of(n)
            })
            .await,
        must,
    )?;
    let children_cores = machine::Reading::now(&stand.dir)?.since(&cores_at_apply);
    say(format!("children: {}; {children_cores}", census.look()));
    // Every Service exists now, so the burst's allocations are all in the log.
    let cluster_ips = cluster_ips::Allocations::read(&stand.dir.join("logs/kube-apiserver.log"))
        .inspect(|found| say(format!("ClusterIPs allocated by the API server: {found}")))
        .inspect_err(|e| say(format!("ClusterIP allocations not read: {e}")))
        .ok();
    let all_ready = reached(
        census
            .until("every cluster ready", start, plan.ready_timeout, |c| {
                c.ready >= n
            })
            .await,
        must,
    )?;
    let census_at_ready = census.look().to_string();
    let queue = match (op, all_ready) {
        (Operator::Tusk, Some(_)) => Some(queue_figures(stand).await?),
        _ => None,
    };
    let ready_cores = machine::Reading::now(&stand.dir)?.since(&cores_at_apply);
    say(format!("ready: {ready_cores}"));
    let converge_requests = stand.requests_since(mark)?;
    let converged = stand.usage()?;
    // The convergence figures now, not only in the table after the deletes (which the
    // controller-manager's garbage collector takes most of a quarter of an hour over at 1,000).
    say(format!(
        "converged: children {children_created:.1?}, ready {all_ready:.1?}, requests {} reads / {} writes, {:.1} CPU s",
        converge_requests.reads, converge_requests.writes, converged.cpu_seconds
    ));

    say(format!("at rest for {:?}", plan.rest));
    let mark = stand.mark()?;
    // The rest window is the measurement itself, not a wait for something to happen.
    tokio::time::sleep(plan.rest).await;
    let rest_requests = stand.requests_since(mark)?;
    let settled = stand.usage()?;

    let (restart_settled, restart_requests) = restart(stand, n, timeout).await?;
    let after_restart = census.look().to_string();
    // Resident memory once the restart's burst (every cache listed at once) is over.
    let restart_wait = AFTER_RESTART.min(plan.rest);
    tokio::time::sleep(restart_wait).await;
    let restarted = stand.usage()?;
    say(format!(
        "RSS settled {} KiB (anonymous {}), restart peak {} / later {} KiB; writes at rest {}, after the restart {} (through every cluster in {restart_settled:.1?})",
        settled.rss_kib,
        settled.anon_kib,
        restarted.peak_kib,
        restarted.rss_kib,
        rest_requests.writes,
        restart_requests.writes
    ));
    at_rest_hook()?;
    let backlog = match plan.backlog {
        0 => None,
        m => Some((m, restart_behind_backlog(stand, plan, census).await?)),
    };

    let start = Instant::now();
    plan.fleet.delete(&stand.client, op).await?;
    let clusters_deleted = census
        .until("every cluster gone", start, timeout, |c| c.clusters == 0)
        .await?;
    let all_deleted = reached(
        census
            .until(
                "every cluster and child gone",
                start,
                plan.delete_timeout,
                |c| c.clusters == 0 && c.no_children(),
            )
            .await,
        false,
    )?;
    let left_after_delete = census.look().to_string();
    Ok(Report {
        operator: op,
        clusters: n,
        namespaces: plan.fleet.namespaces,
        children_created,
        children_cores,
        cluster_ips,
        all_ready,
        ready_timeout: plan.ready_timeout,
        reached: census_at_ready,
        ready_cores,
        queue,
        after_restart,
        converge_requests,
        converged,
        rest: plan.rest,
        rest_requests,
        settled,
        restart_settled,
        restart_meaning: op.settled().meaning(),
        restart_requests,
        restart_wait,
        restarted,
        clusters_deleted,
        all_deleted,
        delete_timeout: plan.delete_timeout,
        left_after_delete,
        backlog,
    })
}

/// Tusk's reconciles until every cluster was Ready (its own counter), and how long after its
/// pods each cluster was Ready.
async fn queue_figures(stand: &Stand) -> Result<report::Queue> {
    let metrics = stand.operator.operator_metrics().await?;
    let lag = ready_lag::ReadyLag::read(&stand.client).await?;
    let waits = ready_waits::ReadyWaits::read(&stand.audit_log(), &lag.pods)?;
    let queue = report::Queue {
        reconciles: metrics::sum(&metrics, "tusk_reconcile_total"),
        lag,
        waits,
    };
    say(format!(
        "{} reconciles; a cluster Ready after its pods: {}; where: {}",
        queue.reconciles, queue.lag, queue.waits
    ));
    Ok(queue)
}

/// `plan.backlog` more clusters applied and, once their creation is under way (a twentieth of
/// them with every child), the operator SIGKILLed and started again: how long until it has
/// reconciled as many clusters as had converged before (the converged ones and the new ones
/// alike: its own count).
async fn restart_behind_backlog(stand: &Stand, plan: &Plan, census: &Census) -> Result<Duration> {
    let (n, m) = (plan.fleet.clusters, plan.backlog);
    let more = Fleet {
        clusters: m,
        first: n,
        ..plan.fleet
    };
    let start = Instant::now();
    more.apply(&stand.client, plan.operator).await?;
    let under_way = n + m.div_ceil(20);
    census
        .until(
            "the backlog's creation under way",
            start,
            plan.timeout,
            |c| c.children_of(under_way),
        )
        .await?;
    let before = census.look().to_string();
    let (took, _) = restart(stand, n, plan.timeout).await?;
    say(format!(
        "restart behind a backlog of {m} new clusters (at the kill: {before}): {n} clusters reconciled in {took:.1?}"
    ));
    Ok(took)
}

/// How long a wait took, or None when it timed out and `must` is false (said, not failed).
fn reached(waited: Result<Duration>, must: bool) -> Result<Option<Duration>> {
    match waited {
        Ok(took) => Ok(Some(took)),
        Err(e) if must => Err(e),
        Err(e) => {
            say(format!("not reached: {e}"));
            Ok(None)
        }
    }
}

/// TUSK_SCALE_AT_REST=PROGRAM runs PROGRAM while every cluster is still there, after the
/// restart (scripts/bench-scale.sh: tusk-cache-memory, where the heap goes per cached kind).
fn at_rest_hook() -> Result {
    let Some(program) = std::env::var_os("TUSK_SCALE_AT_REST") else {
        return Ok(());
    };
    let status = std::process::Command::new(&program)
        .status()
        .context(format!("running {}", program.to_string_lossy()))?;
    if !status.success() {
        fail!("{} failed: {status}", program.to_string_lossy());
    }
    Ok(())
}

/// SIGKILLs the operator at rest and starts it again: how long until it has been through every
/// cluster once (by its own signal, operators.rs), and the requests it made by then.
async fn restart(
    stand: &Stand,
    clusters: usize,
    timeout: Duration,
) -> Result<(Duration, Requests)> {
    stand.script("kill").await?;
    let mark = stand.mark()?;
    let log_mark = std::fs::metadata(stand.operator_log())
        .map(|m| m.len())
        .unwrap_or_default();
    let start = Instant::now();
    stand.script("start").await?;
    loop {
        let done = match stand.under_test.settled() {
            Settled::Clusters(series) | Settled::Reconciles(series) => {
                metrics::sum(&stand.operator.operator_metrics().await?, series)
            }
            Settled::LogLines { needles, key } => {
                log_clusters(&stand.operator_log(), log_mark, needles, key)? as f64
            }
        };
        if done >= clusters as f64 {
            break;
        }
        if start.elapsed() > timeout {
            fail!("after a restart, {done} of {clusters} clusters reconciled within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((start.elapsed(), stand.requests_since(mark)?))
}

/// The clusters named (after `key`) by lines of `log` after byte `mark` that contain one of
/// `needles`; a matching line without `key` counts on its own.
fn log_clusters(log: &Path, mark: u64, needles: &[&str], key: &str) -> Result<usize> {
    let text = std::fs::read(log).context(log.display())?;
    let start = usize::try_from(mark).unwrap_or(usize::MAX).min(text.len());
    Ok(distinct_clusters(
        &String::from_utf8_lossy(&text[start..]),
        needles,
        key,
    ))
}

fn distinct_clusters(text: &str, needles: &[&str], key: &str) -> usize {
    let mut named = std::collections::HashSet::new();
    let mut unnamed = 0;
    for line in text.lines() {
        if !needles.iter().any(|n| line.contains(n)) {
            continue;
        }
        match line.split_once(key) {
            Some((_, rest)) => {
                named.insert(rest.split_whitespace().next().unwrap_or_default());
            }
            None => unnamed += 1,
        }
    }
    named.len() + unnamed
}

/// The directory of the local control plane: TUSK_E2E_DIR, as e2e/local/up.sh wrote it.
pub fn stand_dir() -> Result<PathBuf> {
    let dir = std::env::var_os("TUSK_E2E_DIR").context("TUSK_E2E_DIR is not set")?;
    let dir = PathBuf::from(dir);
    if !Path::new(&dir).join("env").is_file() {
        fail!("no control plane in {} (e2e/local/up.sh)", dir.display());
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cluster_synced_twice_after_a_restart_counts_once() {
        let log = "\
level=info msg=\"cluster has been synced\" cluster-name=ns/a pkg=controller
level=info msg=\"cluster has been synced\" cluster-name=ns/a pkg=controller
level=warning msg=\"could not sync cluster\" cluster-name=ns/b pkg=controller
level=info msg=\"watching\" cluster-name=ns/c
level=info msg=\"cluster has been created\"
";
        let needles = [
            "cluster has been synced",
            "could not sync cluster",
            "has been created",
        ];
        assert_eq!(super::distinct_clusters(log, &needles, "cluster-name="), 3);
    }
}
