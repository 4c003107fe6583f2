//! The `ContinuousArchiving` condition (`spec.backup.walArchive`, issue 27): what the primary's
//! instance manager says about its WAL archiver (`/status`, `archive`), read once per reconcile
//! of an archiving cluster. The alert `TuskWalArchiveFailing` and the manager's own Events are
//! the faster signals; this puts the state where `kubectl get`/`wait` see it.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use tusk_contract::status::{ArchiveContinuity, ArchiveGap, ArchiveStatus};

use super::backup_schedule::summary::Summary;
use super::ha::PrimaryState;
use super::ha::pods::{cluster_pods, read_report};
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
    let Some(primary) = primary.current.as_deref() else {
        return Archiving::NoReport;
    };
    let report = read_report(ctx, cluster, &pods, primary).await;
    match report.and_then(|r| r.archive) {
        Some(archive) => Archiving::Reported(Box::new(archive)),
        None => Archiving::NoReport,
    }
}

/// How soon to read the primary's report again while it owes the continuity check after the
/// newest base backup (its last check is older than the backup): the condition then follows
/// the check within seconds, not at the next resync.
pub const CHECK_OWED_RECHECK: Duration = Duration::from_secs(10);
/// For at most this long after the backup completed: a manager that never checks is for the
/// `TuskWalArchiveUnchecked` alert, not a reason to poll forever.
const CHECK_OWED_WITHIN_SECONDS: i64 = 600;

/// [`CHECK_OWED_RECHECK`] while the primary's last continuity check predates the newest
/// Completed base backup (by less than [`CHECK_OWED_WITHIN_SECONDS`]).
pub fn check_owed(archiving: &Archiving, backups: &Summary, now: Timestamp) -> Option<Duration> {
    let Archiving::Reported(archive) = archiving else {
        return None;
    };
    let newest = backups.newest_base_at.as_ref()?.0.as_second();
    let checked = archive.continuity.as_ref().map_or(0, |c| c.checked_at);
    let age = now.as_second().saturating_sub(newest);
    (checked < newest && (0..CHECK_OWED_WITHIN_SECONDS).contains(&age))
        .then_some(CHECK_OWED_RECHECK)
}

/// `status.recoveryWindow`: from the oldest Completed base backup to the newest archived WAL
/// file (the last report's, else the one `old` recorded: a restarted manager knows none yet).
/// None without archiving or without a base backup: nothing can be restored to a time. A gap
/// the primary reports (open, or the last it closed) cannot be crossed: the window starts
/// from the first base backup completed after it closed, and until there is one it ends where
/// the gap began (`gapAt`). Base backups off the newest timeline's history are counted: the
/// operator reads no history here (restore admission does, and refuses them).
pub fn recovery_window(
    old: Option<&RecoveryWindow>,
    archiving: &Archiving,
    backups: &Summary,
) -> Option<RecoveryWindow> {
    if *archiving == Archiving::NotConfigured {
        return None;
    }
    let (mut first, mut oldest) = backups.oldest_base.clone()?;
    let mut count = backups.base_backups;
    let time = |s: i64| Timestamp::from_second(s).ok().map(Time);
    let (reported, gap) = match archiving {
        Archiving::Reported(archive) => (archive.last_archived_at, archive.gap.as_ref()),
        _ => (None, None),
    };
    let mut gap_at = None;
    if let Some(gap) = gap {
        let closed = gap.closed_at;
        let after: Vec<&(Time, String)> = (backups.bases.iter())
            .filter(|(at, _)| closed.is_some_and(|c| at.0.as_second() >= c))
            .collect();
        match after.first() {
            Some((at, name)) => {
                (first, oldest, count) = (at.clone(), name.clone(), after.len());
            }
            None => gap_at = time(gap.opened_at),
        }
    }
    Some(RecoveryWindow {
        first,
        last_archived_at: reported
            .and_then(time)
            .or_else(|| old.and_then(|w| w.last_archived_at.clone())),
        oldest_base_backup: oldest,
        base_backups: i32::try_from(count).unwrap_or(i32::MAX),
        gap_at,
    })
}

/// The base backup a gap in the archive asks for once it closed (the disk policy,
/// docs/src/design/pitr.md §7): a point-in-time restore cannot cross the gap, so the recovery
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

/// What a continuity check found missing, for the condition.
fn breaks(check: &ArchiveContinuity) -> String {
    let mut parts = Vec::new();
    if check.missing_count > 0 {
        let named = check.missing.len() as u64;
        let more = check.missing_count.saturating_sub(named);
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        parts.push(format!(
            "segment(s) {}{tail} missing",
            check.missing.join(", ")
        ));
    }
    for timeline in &check.missing_history {
        parts.push(format!("the history file of timeline {timeline} missing"));
    }
    for file in &check.foreign {
        parts.push(format!("{file} (not this system's)"));
    }
    parts.join("; ")
}

fn at(seconds: Option<i64>) -> String {
    seconds
        .and_then(|s| Timestamp::from_second(s).ok())
        .map_or_else(|| "an unknown time".to_owned(), |t| t.to_string())
}

/// Files waiting past which archiving is behind, uploads succeeding or not: a gibibyte of
/// 16 MiB segments (a working archiver holds 4 in flight; issue 46 found the condition True
/// while the backlog grew).
const BEHIND_FILES: u64 = 64;

/// The condition a report gives. An open gap: False, naming what was released. A conflicting
/// file (two writers of one timeline): False, its own reason. Failing:
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
    if let Some(file) = &archive.conflict {
        return Update {
            type_: CONTINUOUS_ARCHIVING,
            status: false,
            reason: "ArchiveConflict",
            message: format!(
                "the bucket holds other bytes under {file}'s name: two servers wrote its \
                 timeline (a split brain). Archiving is stopped behind it; the file is never \
                 overwritten nor released unarchived. Find which server wrote the stored copy; \
                 {waiting}"
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
    if archive.pending > BEHIND_FILES {
        let last = match &archive.last_archived_wal {
            Some(file) => format!(
                "the last archived was {file} at {}",
                at(archive.last_archived_at)
            ),
            None => "nothing archived since the primary's manager started".to_owned(),
        };
        return Update {
            type_: CONTINUOUS_ARCHIVING,
            status: false,
            reason: "ArchiveBehind",
            message: format!(
                "{waiting} while uploads succeed: archiving falls behind the WAL written, and a \
                 restore now would lose what they hold (more than walArchive.timeoutSeconds of \
                 commits); {last}"
            ),
        };
    }
    if let Some(check) = archive.continuity.as_ref().filter(|c| c.unexplained() > 0) {
        return Update {
            type_: CONTINUOUS_ARCHIVING,
            status: false,
            reason: "ArchiveBroken",
            message: format!(
                "the continuity check at {} found the archive broken: {}; no point-in-time \
                 restore from a base backup before the break can cross it, take a base backup",
                at(Some(check.checked_at)),
                breaks(check)
            ),
        };
    }
    let mut message = match &archive.last_archived_wal {
        Some(file) => format!(
            "archived {file} at {}; {waiting}",
            at(archive.last_archived_at)
        ),
        None => format!("nothing archived since the primary's manager started; {waiting}"),
    };
    if let Some(check) = archive
        .continuity
        .as_ref()
        .filter(|c| c.first_segment.is_some())
    {
        let (first, last) = (
            check.first_segment.as_deref(),
            check.last_segment.as_deref(),
        );
        let span = format!(
            "from {} to {}",
            first.unwrap_or_default(),
            last.unwrap_or_default()
        );
        let checked = at(Some(check.checked_at));
        message.push_str(&match check.released_count {
            0 => format!(
                "; at {checked} every one of the {} segments {span} was in the archive",
                check.segments + check.pending
            ),
            released => format!(
                "; at {checked} the archive held {} segments {span}, all but {released} the \
                 disk policy released (no restore crosses them)",
                check.segments + check.pending
            ),
        });
    }
    Update {
        type_: CONTINUOUS_ARCHIVING,
        status: true,
        reason: "Archiving",
        message,
    }
}

#[cfg(test)]
#[path = "archiving_tests.rs"]
mod tests;
