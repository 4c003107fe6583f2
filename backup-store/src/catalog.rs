//! Reading what a cluster's prefix holds: complete backups (with a manifest) and leftovers.

use std::collections::BTreeMap;

use crate::layout::{ClusterLocation, LayoutError, MANIFEST_FILE};
use crate::manifest::Manifest;
use crate::retention::{self, Policy};
use crate::store::{self, ObjectInfo, ObjectStore, StoreError};

/// Why a catalog operation failed. The agent maps each to its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An invalid backup id was asked for.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("backup {0} not found (no manifest.json)")]
    BackupNotFound(String),
    #[error("integrity check failed: manifest of {backup_id} is not valid: {source}")]
    InvalidManifest {
        backup_id: String,
        #[source]
        source: serde_json::Error,
    },
}

#[derive(Debug, Clone)]
pub struct BackupEntry {
    pub manifest: Manifest,
    pub objects: Vec<ObjectInfo>,
}

#[derive(Debug, Default)]
pub struct Catalog {
    /// Complete backups, oldest first (by `completedAt`).
    pub backups: Vec<BackupEntry>,
    /// Backup ids that have objects but no readable manifest: they do not exist as backups.
    pub incomplete: Vec<String>,
}

impl Catalog {
    pub fn latest(&self) -> Option<&BackupEntry> {
        self.backups.last()
    }

    pub fn find(&self, backup_id: &str) -> Option<&BackupEntry> {
        self.backups
            .iter()
            .find(|b| b.manifest.backup_id == backup_id)
    }
}

pub async fn load(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
) -> Result<Catalog, CatalogError> {
    let mut by_id: BTreeMap<String, Vec<ObjectInfo>> = BTreeMap::new();
    for object in store.list(&location.prefix()).await? {
        if let Some((id, _)) = location.parse_key(&object.key) {
            let id = id.to_string();
            by_id.entry(id).or_default().push(object);
        }
    }
    let mut catalog = Catalog::default();
    for (id, objects) in by_id {
        let has_manifest = objects.iter().any(|o| {
            location
                .parse_key(&o.key)
                .is_some_and(|(_, f)| f == MANIFEST_FILE)
        });
        if !has_manifest {
            catalog.incomplete.push(id);
            continue;
        }
        let bytes = store::get_bytes(store, &location.manifest_key(&id)).await?;
        match Manifest::from_json(&bytes) {
            Ok(manifest) => catalog.backups.push(BackupEntry { manifest, objects }),
            Err(e) => {
                tracing::warn!(backup_id = %id, error = %e, "unreadable manifest, ignoring this backup");
                catalog.incomplete.push(id);
            }
        }
    }
    catalog.backups.sort_by(|a, b| {
        a.manifest
            .completed_at
            .cmp(&b.manifest.completed_at)
            .then_with(|| a.manifest.backup_id.cmp(&b.manifest.backup_id))
    });
    Ok(catalog)
}

/// Resolves `latest` or an explicit id to a complete backup.
pub async fn resolve(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
) -> Result<Manifest, CatalogError> {
    if backup_id == "latest" {
        let catalog = load(store, location).await?;
        return catalog.latest().map(|b| b.manifest.clone()).ok_or_else(|| {
            CatalogError::BackupNotFound(format!(
                "latest (no complete backup under {})",
                location.prefix()
            ))
        });
    }
    crate::layout::validate_backup_id(backup_id)?;
    match store::get_bytes(store, &location.manifest_key(backup_id)).await {
        Ok(bytes) => Manifest::from_json(&bytes).map_err(|source| CatalogError::InvalidManifest {
            backup_id: backup_id.to_string(),
            source,
        }),
        Err(e) if e.is_not_found() => Err(CatalogError::BackupNotFound(backup_id.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// Deletes exactly one backup: the manifest first (so it stops existing at once), then the rest.
/// Returns the number of objects removed.
pub async fn delete_backup(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
) -> Result<usize, CatalogError> {
    crate::layout::validate_backup_id(backup_id)?;
    let manifest_key = location.manifest_key(backup_id);
    let keys: Vec<String> = store
        .list(&location.backup_prefix(backup_id))
        .await?
        .into_iter()
        .map(|o| o.key)
        .filter(|k| location.parse_key(k).is_some_and(|(id, _)| id == backup_id))
        .collect();
    if keys.is_empty() {
        return Err(CatalogError::BackupNotFound(backup_id.to_string()));
    }
    store
        .delete_many(std::slice::from_ref(&manifest_key))
        .await?;
    let rest: Vec<String> = keys.into_iter().filter(|k| *k != manifest_key).collect();
    store.delete_many(&rest).await?;
    Ok(rest.len() + 1)
}

/// Deletes everything under exactly `<path>/<namespace>/<cluster>/` (the operator's
/// `onDelete: Delete`): manifests first so no half-deleted backup is ever listed as complete,
/// then every other object, then open multipart uploads. Returns the number of objects removed.
pub async fn delete_cluster(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
) -> Result<usize, CatalogError> {
    let prefix = location.prefix();
    let keys: Vec<String> = store
        .list(&prefix)
        .await?
        .into_iter()
        .map(|o| o.key)
        .collect();
    let (manifests, rest): (Vec<String>, Vec<String>) = keys.into_iter().partition(|k| {
        location
            .parse_key(k)
            .is_some_and(|(_, file)| file == MANIFEST_FILE)
    });
    store.delete_many(&manifests).await?;
    store.delete_many(&rest).await?;
    for upload in store.pending_uploads(&prefix).await? {
        store.abort_pending(&upload).await?;
    }
    Ok(manifests.len() + rest.len())
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneReport {
    pub deleted: Vec<String>,
    pub kept: Vec<String>,
    pub objects_deleted: usize,
    pub aborted_uploads: usize,
}

/// Applies retention to one cluster. Also aborts multipart uploads left open for over an hour
/// (an agent killed without a chance to abort).
pub async fn prune(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    policy: Policy,
    now: jiff::Timestamp,
) -> Result<PruneReport, CatalogError> {
    let catalog = load(store, location).await?;
    let candidates = catalog
        .backups
        .iter()
        .map(|b| retention::Candidate {
            backup_id: b.manifest.backup_id.clone(),
            completed_at: b.manifest.completed_at,
        })
        .collect();
    let doomed = retention::select_for_deletion(candidates, policy, now);
    let mut report = PruneReport {
        deleted: Vec::new(),
        kept: Vec::new(),
        objects_deleted: 0,
        aborted_uploads: 0,
    };
    for backup in &doomed {
        tracing::info!(backup_id = %backup.backup_id, completed_at = %backup.completed_at, "deleting backup");
        report.objects_deleted += delete_backup(store, location, &backup.backup_id).await?;
        report.deleted.push(backup.backup_id.clone());
    }
    report.kept = catalog
        .backups
        .iter()
        .map(|b| b.manifest.backup_id.clone())
        .filter(|id| !report.deleted.contains(id))
        .collect();
    let stale_before = now - jiff::SignedDuration::from_hours(1);
    for upload in store.pending_uploads(&location.prefix()).await? {
        if upload.initiated.is_some_and(|t| t < stale_before) {
            store.abort_pending(&upload).await?;
            report.aborted_uploads += 1;
        }
    }
    Ok(report)
}
