//! Retention, applied: the logical backups `keep`/`maxAge` no longer keep, and with a recovery
//! window the base backups and WAL it no longer needs (see [`crate::recovery_window`]).

use crate::catalog::{BackupEntry, delete_backup, load};
use crate::catalog_error::CatalogError;
use crate::claim::recorded_owner;
use crate::layout::ClusterLocation;
use crate::live_history::LiveHistories;
use crate::ownership::Owner;
use crate::recovery_window;
use crate::retention::{self, Candidate, Policy};
use crate::store::ObjectStore;

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneReport {
    pub deleted: Vec<String>,
    pub kept: Vec<String>,
    pub objects_deleted: usize,
    /// WAL files deleted with the base backups that needed them (recovery window only).
    pub wal_objects_deleted: usize,
    pub aborted_uploads: usize,
    /// Backups retention never considered: other owners', and the one this cluster was
    /// restored from (they are in `kept` too).
    pub not_ours: Vec<String>,
}

fn candidate(b: &BackupEntry) -> Candidate {
    Candidate {
        backup_id: b.manifest.backup_id.clone(),
        completed_at: b.manifest.completed_at,
    }
}

/// Applies retention to the backups of one cluster that `owner` may delete (see
/// [`crate::ownership`]): the policy counts and ages only those, so another owner's backups
/// neither go nor push ours out. Also aborts this cluster's multipart uploads left open for over
/// an hour (an agent killed without a chance to abort).
pub async fn prune(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    owner: &Owner,
    policy: Policy,
    now: jiff::Timestamp,
) -> Result<PruneReport, CatalogError> {
    let catalog = load(store, location).await?;
    let is_ours = |b: &BackupEntry| {
        owner.may_delete(&b.manifest.backup_id, b.manifest.cluster_uid.as_deref())
    };
    let (ours, not_ours): (Vec<&BackupEntry>, Vec<&BackupEntry>) =
        catalog.backups.iter().partition(|b| is_ours(b));
    // `keep` and `maxAge` count logical backups. A base backup is kept: with the WAL after it,
    // it is a recovery window, which only the window may shorten.
    let (base, logical): (Vec<&BackupEntry>, Vec<&BackupEntry>) =
        ours.iter().partition(|b| b.manifest.physical.is_some());
    let logical = logical.into_iter().map(candidate).collect();
    let mut doomed = retention::select_for_deletion(logical, policy, now);
    if let Some(window) = policy.recovery_window {
        // Only a base backup on the newest history can start the window: one on a branch the
        // history left reaches none of it, and goes once it is older than the window.
        let systems = (base.iter())
            .filter_map(|b| Some(b.manifest.physical.as_ref()?.system_identifier.clone()))
            .collect();
        let live = LiveHistories::load(store, location, systems).await;
        let live = live.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "reading the timeline histories failed: every base backup counts as on them");
            LiveHistories::default()
        });
        let on = |b: &&BackupEntry| b.manifest.physical.as_ref().is_none_or(|p| live.holds(p));
        let (on, off): (Vec<&BackupEntry>, Vec<&BackupEntry>) = base.into_iter().partition(on);
        let on = on.into_iter().map(candidate).collect();
        doomed.extend(recovery_window::select_for_deletion(on, window, now));
        let off = off.into_iter().map(candidate).collect();
        doomed.extend(recovery_window::older_than_window(off, window, now));
    }
    let mut report = PruneReport {
        deleted: Vec::new(),
        kept: Vec::new(),
        objects_deleted: 0,
        wal_objects_deleted: 0,
        aborted_uploads: 0,
        not_ours: not_ours
            .iter()
            .map(|b| b.manifest.backup_id.clone())
            .collect(),
    };
    for backup in &doomed {
        tracing::info!(backup_id = %backup.backup_id, completed_at = %backup.completed_at, "deleting backup");
        report.objects_deleted += delete_backup(store, location, &backup.backup_id).await?;
        report.deleted.push(backup.backup_id.clone());
    }
    let kept: Vec<&BackupEntry> = catalog
        .backups
        .iter()
        .filter(|b| !report.deleted.contains(&b.manifest.backup_id))
        .collect();
    report.kept = kept.iter().map(|b| b.manifest.backup_id.clone()).collect();
    if policy.recovery_window.is_some() {
        // Only after the base backups: a failure in between leaves WAL nobody needs, never a
        // base backup without its WAL.
        let ours_kept: Vec<_> = (kept.iter().filter(|b| is_ours(b)))
            .filter_map(|b| b.manifest.physical.clone())
            .collect();
        let all_kept: Vec<_> = (kept.iter())
            .filter_map(|b| b.manifest.physical.clone())
            .collect();
        for floor in recovery_window::floors(&ours_kept, &all_kept) {
            report.wal_objects_deleted +=
                recovery_window::delete_wal_before(store, location, &floor).await?;
        }
    }
    let stale_before = now - jiff::SignedDuration::from_hours(1);
    for upload in store.pending_uploads(&location.prefix()).await? {
        // Not a nested cluster's upload, and not another owner's (a long dump of a peer).
        let Some((id, _)) = location.parse_key(&upload.key) else {
            continue;
        };
        if upload.initiated.is_some_and(|t| t < stale_before)
            && owner.may_delete(id, recorded_owner(store, location, id).await?.as_deref())
        {
            store.abort_pending(&upload).await?;
            report.aborted_uploads += 1;
        }
    }
    Ok(report)
}
