//! `GET /metrics` on the status port: each instance's own view in Prometheus' text format —
//! whether PostgreSQL runs and in which role, its timeline, a replica's replay lag and WAL
//! receiver, and on the primary every standby's lag in bytes. Scraped per pod (the chart's
//! PodMonitor), so replication lag is measured where it is known, without the operator polling.

use std::fmt::Write as _;

use crate::monitor::Observation;
use crate::report::{PostgresState, Role, StatusReport};
use tusk_contract::status::ArchiveStatus;

/// The volume PGDATA is on: bytes in all, and bytes used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Volume {
    pub size: u64,
    pub used: u64,
}

/// The volume holding `pgdata` (statvfs), if it can be read.
pub fn volume(pgdata: &std::path::Path) -> Option<Volume> {
    let path = std::ffi::CString::new(pgdata.as_os_str().as_encoded_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs writes only into `stat`; `path` is a valid C string.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let block = stat.f_frsize.max(1);
    let size = stat.f_blocks * block;
    let free = stat.f_bfree * block;
    Some(Volume {
        size,
        used: size.saturating_sub(free),
    })
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

/// The exposition for `report`, with what the monitor saw (on the primary: its standbys and
/// slots) and the data volume.
pub fn render(report: &StatusReport, observed: &Observation, volume: Option<Volume>) -> String {
    let (standbys, slots) = (&observed.standbys, &observed.slots);
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
    if !slots.is_empty() {
        let retained: Vec<(String, i64)> = slots
            .iter()
            .filter_map(|s| Some((format!(",slot=\"{}\"", label(&s.name)), s.retained_bytes?)))
            .collect();
        gauge(
            "tusk_instance_slot_retained_wal_bytes",
            "On the primary: WAL kept for each replication slot",
            &retained,
        );
        let lost: Vec<(String, i64)> = slots
            .iter()
            .map(|s| {
                let lost = s.wal_status.as_deref() == Some("lost");
                (format!(",slot=\"{}\"", label(&s.name)), i64::from(lost))
            })
            .collect();
        gauge(
            "tusk_instance_slot_lost",
            "On the primary: 1 for a slot whose WAL was removed (max_slot_wal_keep_size)",
            &lost,
        );
    }
    if let Some(volume) = volume {
        let bytes = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        gauge(
            "tusk_instance_volume_size_bytes",
            "Size of the data volume",
            &[(String::new(), bytes(volume.size))],
        );
        gauge(
            "tusk_instance_volume_used_bytes",
            "Bytes used on the data volume",
            &[(String::new(), bytes(volume.used))],
        );
    }
    if let Some(archive) = &report.archive {
        archive_metrics(&mut out, &pod, archive, report.role == Role::Primary);
    }
    out
}

/// The archiver's record (issue 27): counters, the time of the last success and failure, and
/// the files waiting (`.ready`), which is the archive's lag in segments.
fn archive_metrics(out: &mut String, pod: &str, archive: &ArchiveStatus, primary: bool) {
    let mut metric = |kind: &str, name: &str, help: &str, value: Option<i64>| {
        if let Some(value) = value {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{pod=\"{pod}\"}} {value}"
            );
        }
    };
    let count = |n: u64| Some(i64::try_from(n).unwrap_or(i64::MAX));
    metric(
        "counter",
        "tusk_instance_archive_archived_total",
        "WAL files archived by this manager since it started",
        count(archive.archived_count),
    );
    metric(
        "counter",
        "tusk_instance_archive_failed_total",
        "Failed attempts to archive a WAL file since the manager started",
        count(archive.failed_count),
    );
    metric(
        "gauge",
        "tusk_instance_archive_pending_files",
        "WAL files PostgreSQL has ready for the archive and not archived yet",
        count(archive.pending),
    );
    metric(
        "gauge",
        "tusk_instance_archive_last_archived_timestamp_seconds",
        "When the last WAL file was archived",
        archive.last_archived_at,
    );
    metric(
        "gauge",
        "tusk_instance_archive_last_failed_timestamp_seconds",
        "When archiving a WAL file last failed",
        archive.last_failed_at,
    );
    metric(
        "counter",
        "tusk_instance_archive_gave_way_total",
        "WAL files released unarchived by the disk policy since the manager started",
        count(archive.gave_way_count),
    );
    metric(
        "gauge",
        "tusk_instance_archive_conflict",
        "1 while archiving is stopped behind a file the bucket holds other bytes for (two \
         servers wrote one timeline), else 0",
        Some(i64::from(archive.conflict.is_some())),
    );
    let open = archive.gap.as_ref().is_some_and(|g| g.closed_at.is_none());
    metric(
        "gauge",
        "tusk_instance_archive_gap_open",
        "1 while WAL is being released unarchived (a gap in the archive), else 0",
        Some(i64::from(open)),
    );
    // The continuity check (issue 28): absent before the first check, and on a former
    // primary, whose last report would otherwise keep an alert firing on a replica.
    let Some(check) = archive.continuity.as_ref().filter(|_| primary) else {
        return;
    };
    metric(
        "gauge",
        "tusk_instance_archive_continuity_checked_timestamp_seconds",
        "When the archive's continuity was last checked (even if the check failed)",
        Some(check.checked_at),
    );
    metric(
        "gauge",
        "tusk_instance_archive_continuity_broken_files",
        "Files a restore from the oldest base backup needs and the archive lacks, unexplained: \
         missing segments and history files, and files of another system",
        count(check.unexplained()),
    );
    metric(
        "gauge",
        "tusk_instance_archive_continuity_released_segments",
        "Segments from the oldest base backup on that the disk policy released unarchived",
        count(check.released_count),
    );
    metric(
        "gauge",
        "tusk_instance_archive_continuity_check_failed",
        "1 when the last continuity check could not run, else 0",
        Some(i64::from(check.error.is_some())),
    );
}

/// Every metric name starting with `prefix` that `rules` (the chart's alert rules) mention.
#[cfg(test)]
pub(crate) fn queried_metrics<'a>(rules: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut names = Vec::new();
    let mut rest = rules;
    while let Some(start) = rest.find(prefix) {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        names.push(&tail[..end]);
        rest = &tail[end..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::{Slot, Standby};
    use crate::report::Lsns;
    use tusk_contract::status::ArchiveContinuity;

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
            ..StatusReport::default()
        }
    }

    #[test]
    fn a_replica_reports_its_role_timeline_and_replay_lag() {
        let text = render(&report(Role::Replica), &Observation::default(), None);
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
        let observed = Observation {
            standbys: standbys.to_vec(),
            slots: vec![Slot {
                name: "tusk_demo_2".into(),
                active: false,
                retained_bytes: Some(1 << 30),
                wal_status: Some("lost".into()),
            }],
            ..Observation::default()
        };
        let volume = Volume {
            size: 10 << 30,
            used: 9 << 30,
        };
        let text = render(&report(Role::Primary), &observed, Some(volume));
        for line in [
            "tusk_instance_role{pod=\"demo-1\",role=\"primary\"} 1",
            "tusk_instance_standby_streaming{pod=\"demo-1\",standby=\"demo-2\"} 0",
            "tusk_instance_standby_lag_bytes{pod=\"demo-1\",standby=\"demo-2\"} 8192",
            "tusk_instance_slot_retained_wal_bytes{pod=\"demo-1\",slot=\"tusk_demo_2\"} 1073741824",
            "tusk_instance_slot_lost{pod=\"demo-1\",slot=\"tusk_demo_2\"} 1",
            "tusk_instance_volume_used_bytes{pod=\"demo-1\"} 9663676416",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("replay_lag"), "{text}");
    }

    #[test]
    fn the_archiver_is_reported_only_where_it_runs() {
        let mut primary = report(Role::Primary);
        assert!(!render(&primary, &Observation::default(), None).contains("archive"));
        primary.archive = Some(ArchiveStatus {
            archived_count: 12,
            failed_count: 2,
            pending: 3,
            last_archived_at: Some(1_800_000_000),
            continuity: Some(ArchiveContinuity {
                checked_at: 1_800_000_100,
                missing_count: 2,
                missing_history: vec![3],
                released_count: 4,
                ..ArchiveContinuity::default()
            }),
            ..ArchiveStatus::default()
        });
        let text = render(&primary, &Observation::default(), None);
        let mut former = primary.clone();
        former.role = Role::Replica;
        let replica = render(&former, &Observation::default(), None);
        assert!(!replica.contains("continuity"), "{replica}");
        for line in [
            "# TYPE tusk_instance_archive_archived_total counter",
            "tusk_instance_archive_archived_total{pod=\"demo-1\"} 12",
            "tusk_instance_archive_failed_total{pod=\"demo-1\"} 2",
            "tusk_instance_archive_pending_files{pod=\"demo-1\"} 3",
            "tusk_instance_archive_last_archived_timestamp_seconds{pod=\"demo-1\"} 1800000000",
            "tusk_instance_archive_continuity_checked_timestamp_seconds{pod=\"demo-1\"} 1800000100",
            "tusk_instance_archive_continuity_broken_files{pod=\"demo-1\"} 3",
            "tusk_instance_archive_continuity_released_segments{pod=\"demo-1\"} 4",
            "tusk_instance_archive_continuity_check_failed{pod=\"demo-1\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(
            !text.contains("last_failed_timestamp"),
            "never failed: {text}"
        );
    }

    #[test]
    fn the_charts_alerts_query_only_metrics_the_manager_exports() {
        let rules = include_str!("../../deploy/helm/tusk/files/prometheus-rules.yaml");
        let observed = Observation {
            standbys: vec![Standby {
                name: "demo-2".into(),
                state: "streaming".into(),
                lag_bytes: Some(0),
            }],
            slots: vec![Slot {
                name: "tusk_demo_2".into(),
                active: true,
                retained_bytes: Some(0),
                wal_status: Some("reserved".into()),
            }],
            ..Observation::default()
        };
        let volume = Some(Volume { size: 1, used: 1 });
        let mut primary = report(Role::Primary);
        primary.archive = Some(ArchiveStatus {
            last_archived_at: Some(1),
            last_failed_at: Some(1),
            continuity: Some(ArchiveContinuity::default()),
            ..ArchiveStatus::default()
        });
        let exposition = render(&primary, &observed, volume)
            + &render(&report(Role::Replica), &Observation::default(), None);
        let queried = queried_metrics(rules, "tusk_instance_");
        for name in &queried {
            assert!(
                exposition.contains(&format!("# TYPE {name} ")),
                "the chart's alerts query {name}, which the manager does not export"
            );
        }
        assert!(
            queried.len() >= 4,
            "{queried:?}: instance metrics in the rules"
        );
    }
}
