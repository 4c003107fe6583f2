//! The `ContinuousArchiving` condition (`spec.backup.walArchive`, issue 27): what the primary's
//! instance manager says about its WAL archiver (`/status`, `archive`), read once per reconcile
//! of an archiving cluster. The alert `TuskWalArchiveFailing` and the manager's own Events are
//! the faster signals; this puts the state where `kubectl get`/`wait` see it.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use tusk_contract::status::{ArchiveGap, ArchiveStatus};

use super::backup_schedule::summary::Summary;
use super::ha::PrimaryState;
use super::ha::pods::{cluster_pods, pod_ip};
use crate::crd::conditions::CONTINUOUS_ARCHIVING;
use crate::crd::{Backup, BackupMethod, RecoveryWindow};
use crate::error::Result;
use crate::resources::{CLUSTER_LABEL, Cluster, MANAGED_BY, wal_archiving};
use crate::runtime::apply::{Written, create};
use crate::runtime::conditions::Update;
use crate::runtime::{Context, cached};

/// How long after a gap closed its base backup is still asked for: long enough for an operator
/// restart, short enough that retention deleting that backup weeks later does not bring it
/// back (the manager remembers its last gap until it restarts).
const GAP_BACKUP_WITHIN_SECONDS: i64 = 3600;

/// What this reconcile learned about archiving.
#[derive(Clone, Debug, PartialEq)]
pub enum Archiving {
    /// No `spec.backup.walArchive`: no condition.
    NotConfigured,
    /// No primary, or its manager did not answer: the condition stays as it was.
    NoReport,
    Reported(Box<ArchiveStatus>),
}

/// Asks the Lease holder's manager.
pub async fn observe(cluster: &Cluster<'_>, primary: &PrimaryState, ctx: &Context) -> Archiving {
    if wal_archiving(cluster).is_none() {
        return Archiving::NotConfigured;
    }
    let pods = cluster_pods(ctx, cluster);
    let ip = primary.current.as_deref().and_then(|p| pod_ip(&pods, p));
    let Some(ip) = ip else {
        return Archiving::NoReport;
    };
    match ctx.instances.report(&ip).await.and_then(|r| r.archive) {
        Some(archive) => Archiving::Reported(Box::new(archive)),
        None => Archiving::NoReport,
    }
}

/// `status.recoveryWindow`: from the oldest Completed base backup to the newest archived WAL
/// file (the last report's, else the one `old` recorded: a restarted manager knows none yet).
/// None without archiving or without a base backup: nothing can be restored to a time.
pub fn recovery_window(
    old: Option<&RecoveryWindow>,
    archiving: &Archiving,
    backups: &Summary,
) -> Option<RecoveryWindow> {
    if *archiving == Archiving::NotConfigured {
        return None;
    }
    let (first, oldest) = backups.oldest_base.clone()?;
    let reported = match archiving {
        Archiving::Reported(archive) => archive.last_archived_at,
        _ => None,
    };
    let reported = reported
        .and_then(|s| Timestamp::from_second(s).ok())
        .map(Time);
    Some(RecoveryWindow {
        first,
        last_archived_at: reported.or_else(|| old.and_then(|w| w.last_archived_at.clone())),
        oldest_base_backup: oldest,
        base_backups: i32::try_from(backups.base_backups).unwrap_or(i32::MAX),
    })
}

/// The base backup a gap in the archive asks for once it closed (the disk policy,
/// docs/pitr-design.md §7): a point-in-time restore cannot cross the gap, so the recovery
/// window starts again from a base backup taken after it. Named after the gap, so it is asked
/// for once.
pub fn gap_backup(cluster: &Cluster, gap: &ArchiveGap, now: Timestamp) -> Option<Backup> {
    let closed = gap.closed_at?;
    if now.as_second().saturating_sub(closed) > GAP_BACKUP_WITHIN_SECONDS {
        return None;
    }
    let name = format!("{}-gap-{closed}", cluster.name);
    let mut backup = Backup::of_cluster(&name, cluster.namespace, cluster.name);
    backup.spec.method = BackupMethod::Physical;
    backup.metadata.labels = Some(BTreeMap::from([
        (CLUSTER_LABEL.to_owned(), cluster.name.to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGED_BY.to_owned(),
        ),
    ]));
    Some(backup)
}

/// Creates [`gap_backup`] when the primary reports a gap that closed and no Backup has its
/// name yet.
pub async fn backup_after_gap(
    cluster: &Cluster<'_>,
    archiving: &Archiving,
    ctx: &Context,
) -> Result<Vec<Written>> {
    let Archiving::Reported(archive) = archiving else {
        return Ok(Vec::new());
    };
    let Some(gap) = &archive.gap else {
        return Ok(Vec::new());
    };
    let Some(backup) = gap_backup(cluster, gap, Timestamp::now()) else {
        return Ok(Vec::new());
    };
    let name = backup.metadata.name.as_deref().unwrap_or_default();
    if cached(&ctx.caches.backups, cluster.namespace, name).is_some() {
        return Ok(Vec::new());
    }
    let api: Api<Backup> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    Ok(Written::of(&backup, create(&api, &backup).await?)
        .into_iter()
        .collect())
}

fn at(seconds: Option<i64>) -> String {
    seconds
        .and_then(|s| Timestamp::from_second(s).ok())
        .map_or_else(|| "an unknown time".to_owned(), |t| t.to_string())
}

/// The condition a report gives. An open gap: False, naming what was released. Failing:
/// False, with the store's error (never a credential) and the backlog; else True, saying what
/// was archived last.
pub fn condition(archive: &ArchiveStatus) -> Update<'static> {
    let waiting = match archive.pending {
        0 => "nothing waits".to_owned(),
        n => format!("{n} file(s) wait"),
    };
    if let Some(gap) = archive.gap.as_ref().filter(|g| g.closed_at.is_none()) {
        let range = match (&gap.first_segment, &gap.last_segment) {
            (Some(first), Some(last)) => format!("{first} to {last}"),
            _ => gap.other_files.join(", "),
        };
        return Update {
            type_: CONTINUOUS_ARCHIVING,
            status: false,
            reason: "ArchiveGap",
            message: format!(
                "the data volume reached {} % while archiving failed ({}): {} WAL file(s) ({range}) \
                 were released unarchived since {} so the database keeps running; no \
                 point-in-time restore can cross this gap, and a base backup follows when the \
                 bucket answers",
                gap.volume_used_percent,
                gap.reason,
                gap.files,
                at(Some(gap.opened_at))
            ),
        };
    }
    if archive.failing {
        let file = archive.last_failed_wal.as_deref().unwrap_or("a WAL file");
        let error = archive.last_error.as_deref().unwrap_or("no error recorded");
        return Update {
            type_: CONTINUOUS_ARCHIVING,
            status: false,
            reason: "ArchiveFailing",
            message: format!(
                "archiving {file} failed at {}: {error}; {waiting}",
                at(archive.last_failed_at)
            ),
        };
    }
    let message = match &archive.last_archived_wal {
        Some(file) => format!(
            "archived {file} at {}; {waiting}",
            at(archive.last_archived_at)
        ),
        None => format!("nothing archived since the primary's manager started; {waiting}"),
    };
    Update {
        type_: CONTINUOUS_ARCHIVING,
        status: true,
        reason: "Archiving",
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_archiver_is_false_with_its_error_and_backlog() {
        let update = condition(&ArchiveStatus {
            archived_count: 3,
            failed_count: 2,
            failing: true,
            pending: 4,
            last_archived_wal: Some("000000010000000000000003".into()),
            last_archived_at: Some(1_800_000_000),
            last_failed_wal: Some("000000010000000000000004".into()),
            last_failed_at: Some(1_800_000_060),
            last_error: Some("s3://b: connection refused".into()),
            ..ArchiveStatus::default()
        });
        assert_eq!((update.status, update.reason), (false, "ArchiveFailing"));
        assert_eq!(
            update.message,
            "archiving 000000010000000000000004 failed at 2027-01-15T08:01:00Z: \
             s3://b: connection refused; 4 file(s) wait"
        );
    }

    fn closed_gap(closed_at: Option<i64>) -> ArchiveGap {
        ArchiveGap {
            system_identifier: "7400000000000000001".into(),
            first_segment: Some("000000010000000000000010".into()),
            last_segment: Some("000000010000000000000013".into()),
            files: 4,
            opened_at: 1_800_000_000,
            closed_at,
            volume_used_percent: 81,
            reason: "s3://b: connection refused".into(),
            ..ArchiveGap::default()
        }
    }

    #[test]
    fn an_open_gap_is_false_and_names_what_was_released() {
        let update = condition(&ArchiveStatus {
            failing: true,
            gap: Some(closed_gap(None)),
            ..ArchiveStatus::default()
        });
        assert_eq!((update.status, update.reason), (false, "ArchiveGap"));
        assert!(
            update.message.starts_with(
                "the data volume reached 81 % while archiving failed (s3://b: connection \
                 refused): 4 WAL file(s) (000000010000000000000010 to 000000010000000000000013) \
                 were released unarchived since 2027-01-15T08:00:00Z"
            ),
            "{}",
            update.message
        );
        // Closed: archiving works again; the base backup is asked for instead.
        let closed = condition(&ArchiveStatus {
            gap: Some(closed_gap(Some(1_800_000_100))),
            ..ArchiveStatus::default()
        });
        assert!(closed.status);
    }

    #[test]
    fn a_closed_gap_asks_for_one_base_backup_named_after_it_within_the_hour() {
        let pg = crate::resources::fixtures::postgresql(crate::resources::fixtures::MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let now = Timestamp::from_second(1_800_000_200).unwrap();
        assert_eq!(gap_backup(&cluster, &closed_gap(None), now), None);
        let backup = gap_backup(&cluster, &closed_gap(Some(1_800_000_100)), now).unwrap();
        assert_eq!(
            backup.metadata.name.as_deref(),
            Some(format!("{}-gap-1800000100", cluster.name).as_str())
        );
        assert_eq!(backup.spec.method, BackupMethod::Physical);
        assert_eq!(backup.spec.cluster.name, cluster.name);
        let later = Timestamp::from_second(1_800_000_100 + 3601).unwrap();
        assert_eq!(
            gap_backup(&cluster, &closed_gap(Some(1_800_000_100)), later),
            None
        );
    }

    #[test]
    fn a_working_archiver_is_true_and_says_what_it_archived_last() {
        let update = condition(&ArchiveStatus {
            archived_count: 3,
            last_archived_wal: Some("000000010000000000000003".into()),
            last_archived_at: Some(1_800_000_000),
            ..ArchiveStatus::default()
        });
        assert_eq!((update.status, update.reason), (true, "Archiving"));
        assert_eq!(
            update.message,
            "archived 000000010000000000000003 at 2027-01-15T08:00:00Z; nothing waits"
        );
        let idle = condition(&ArchiveStatus::default());
        assert!(idle.status && idle.message.starts_with("nothing archived"));
    }

    #[test]
    fn the_recovery_window_spans_the_oldest_base_backup_to_the_last_archived_file() {
        let at = |s| Time(Timestamp::from_second(s).unwrap());
        let backups = Summary {
            oldest_base: Some((at(1_000), "base-old".into())),
            base_backups: 3,
            ..Summary::default()
        };
        let report = Archiving::Reported(Box::new(ArchiveStatus {
            last_archived_at: Some(5_000),
            ..ArchiveStatus::default()
        }));
        let window = recovery_window(None, &report, &backups).unwrap();
        assert_eq!(
            (window.first.clone(), window.last_archived_at.clone()),
            (at(1_000), Some(at(5_000)))
        );
        assert_eq!(
            (window.oldest_base_backup.as_str(), window.base_backups),
            ("base-old", 3)
        );
        // No report this time (a manager restarting): the last one known stays.
        let kept = recovery_window(Some(&window), &Archiving::NoReport, &backups).unwrap();
        assert_eq!(kept.last_archived_at, Some(at(5_000)));
        // Without a base backup, or without archiving, there is no window.
        assert_eq!(
            recovery_window(Some(&window), &report, &Summary::default()),
            None
        );
        assert_eq!(
            recovery_window(Some(&window), &Archiving::NotConfigured, &backups),
            None
        );
    }
}
