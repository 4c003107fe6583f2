//! `GET /metrics` on the status port: each instance's own view in Prometheus' text format —
//! whether PostgreSQL runs and in which role, its timeline, a replica's replay lag and WAL
//! receiver, and on the primary every standby's lag in bytes. Scraped per pod (the chart's
//! PodMonitor), so replication lag is measured where it is known, without the operator polling.

use std::fmt::Write as _;

use crate::context::Context;
use crate::error::Error;
use crate::report::{PostgresState, Role, StatusReport};

/// A standby as the primary's `pg_stat_replication` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standby {
    pub name: String,
    pub state: String,
    /// Bytes between the primary's current WAL position and what the standby replayed.
    pub lag_bytes: Option<i64>,
}

// pg_basebackup's streams are clones in progress, not members.
const STANDBYS: &str = "SELECT application_name, state, \
    pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::int8 \
    FROM pg_stat_replication WHERE application_name <> 'pg_basebackup' ORDER BY 1";

/// The primary's standbys; empty on a replica or when the server does not answer.
pub async fn standbys(ctx: &Context, report: &StatusReport) -> Result<Vec<Standby>, Error> {
    if report.role != Role::Primary || report.postgres != PostgresState::Running {
        return Ok(Vec::new());
    }
    let client = crate::sql::connect(ctx, "postgres").await?;
    let rows = client
        .query(STANDBYS, &[])
        .await
        .map_err(Error::sql("reading pg_stat_replication"))?;
    Ok(rows
        .iter()
        .map(|row| Standby {
            name: row.get(0),
            state: row.get(1),
            lag_bytes: row.get(2),
        })
        .collect())
}

/// `X/Y` as a byte position.
fn lsn(text: Option<&str>) -> Option<i64> {
    let (high, low) = text?.split_once('/')?;
    let position =
        (u64::from_str_radix(high, 16).ok()? << 32) | u64::from_str_radix(low, 16).ok()?;
    i64::try_from(position).ok()
}

/// Label values are pod and application names (DNS labels): nothing to escape but a quote or
/// backslash, which they cannot contain; replaced anyway so the output stays parseable.
fn label(value: &str) -> String {
    value.replace(['"', '\\', '\n'], "_")
}

/// The exposition for `report` (and, on the primary, its `standbys`).
pub fn render(report: &StatusReport, standbys: &[Standby]) -> String {
    let pod = label(&report.pod);
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, samples: &[(String, i64)]| {
        if samples.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{{pod=\"{pod}\"{labels}}} {value}");
        }
    };
    let role = report.role.as_str();
    let running = report.postgres == PostgresState::Running;
    gauge(
        "tusk_instance_up",
        "1 while PostgreSQL runs in this pod",
        &[(String::new(), i64::from(running))],
    );
    gauge(
        "tusk_instance_role",
        "The instance manager's role for this pod (1 for the current one)",
        &[(format!(",role=\"{role}\""), 1)],
    );
    gauge(
        "tusk_instance_fenced",
        "1 while this pod fenced itself (no fresh Lease)",
        &[(String::new(), i64::from(report.fenced))],
    );
    if let Some(timeline) = report.timeline {
        gauge(
            "tusk_instance_timeline",
            "The timeline PostgreSQL runs on",
            &[(String::new(), i64::from(timeline))],
        );
    }
    if report.role == Role::Replica {
        let streaming = report.wal_receiver.as_deref() == Some("streaming");
        gauge(
            "tusk_instance_wal_receiver_streaming",
            "1 while this replica streams from the primary",
            &[(String::new(), i64::from(streaming))],
        );
        let received = lsn(report.lsn.received.as_deref());
        let replayed = lsn(report.lsn.replayed.as_deref());
        if let (Some(received), Some(replayed)) = (received, replayed) {
            gauge(
                "tusk_instance_replay_lag_bytes",
                "WAL this replica received but has not replayed yet",
                &[(String::new(), (received - replayed).max(0))],
            );
        }
    }
    if !standbys.is_empty() {
        let streaming: Vec<(String, i64)> = standbys
            .iter()
            .map(|s| {
                (
                    format!(",standby=\"{}\"", label(&s.name)),
                    i64::from(s.state == "streaming"),
                )
            })
            .collect();
        gauge(
            "tusk_instance_standby_streaming",
            "On the primary: 1 for each standby that streams",
            &streaming,
        );
        let lag: Vec<(String, i64)> = standbys
            .iter()
            .filter_map(|s| Some((format!(",standby=\"{}\"", label(&s.name)), s.lag_bytes?)))
            .collect();
        gauge(
            "tusk_instance_standby_lag_bytes",
            "On the primary: WAL written here that each standby has not replayed yet",
            &lag,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Lsns;

    fn report(role: Role) -> StatusReport {
        StatusReport {
            pod: "demo-1".into(),
            role,
            postgres: PostgresState::Running,
            ready: true,
            lease_holder: Some("demo-0".into()),
            timeline: Some(2),
            system_identifier: None,
            in_recovery: Some(role == Role::Replica),
            lsn: Lsns {
                current: None,
                received: Some("0/3000100".into()),
                replayed: Some("0/3000060".into()),
            },
            wal_receiver: Some("streaming".into()),
            fenced: false,
        }
    }

    #[test]
    fn a_replica_reports_its_role_timeline_and_replay_lag() {
        let text = render(&report(Role::Replica), &[]);
        for line in [
            "tusk_instance_up{pod=\"demo-1\"} 1",
            "tusk_instance_role{pod=\"demo-1\",role=\"replica\"} 1",
            "tusk_instance_timeline{pod=\"demo-1\"} 2",
            "tusk_instance_wal_receiver_streaming{pod=\"demo-1\"} 1",
            "tusk_instance_replay_lag_bytes{pod=\"demo-1\"} 160",
            "# TYPE tusk_instance_fenced gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("standby"), "{text}");
    }

    #[test]
    fn the_primary_reports_each_standbys_lag() {
        let standbys = [
            Standby {
                name: "demo-1".into(),
                state: "streaming".into(),
                lag_bytes: Some(0),
            },
            Standby {
                name: "demo-2".into(),
                state: "catchup".into(),
                lag_bytes: Some(8192),
            },
        ];
        let text = render(&report(Role::Primary), &standbys);
        for line in [
            "tusk_instance_role{pod=\"demo-1\",role=\"primary\"} 1",
            "tusk_instance_standby_streaming{pod=\"demo-1\",standby=\"demo-2\"} 0",
            "tusk_instance_standby_lag_bytes{pod=\"demo-1\",standby=\"demo-2\"} 8192",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("replay_lag"), "{text}");
    }
}
