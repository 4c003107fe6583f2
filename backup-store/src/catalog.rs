//! Reading what a cluster's prefix holds: complete backups (with a manifest) and leftovers.

use std::collections::{BTreeMap, BTreeSet};

use crate::claim::{CLAIM_FILE, recorded_owner};
use crate::layout::{ClusterLocation, MANIFEST_FILE};
use crate::manifest::{Manifest, Method};
use crate::ownership::Owner;
use crate::store::{self, ObjectInfo, ObjectStore};

pub use crate::catalog_error::CatalogError;

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

/// The folder of the WAL archive under a cluster's prefix: never part of a backup's listing,
/// since it grows with the archive's age (17,280 segments a day at the 5 s default).
pub const WAL_FOLDER: &str = "wal/";

/// Pages through the cluster's prefix without the WAL archive: what a catalog costs grows
/// with the backups kept, not with the archive.
fn backup_objects<'a>(store: &'a dyn ObjectStore, location: &ClusterLocation) -> store::Pager<'a> {
    store::Pager::new(store, &location.prefix(), &[WAL_FOLDER])
}

pub async fn load(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
) -> Result<Catalog, CatalogError> {
    let mut by_id: BTreeMap<String, Vec<ObjectInfo>> = BTreeMap::new();
    let mut pages = backup_objects(store, location);
    while let Some(page) = pages.next().await? {
        for object in page {
            if let Some((id, _)) = location.parse_key(&object.key) {
                by_id.entry(id.to_string()).or_default().push(object);
            }
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

/// Resolves `latest` (the newest complete backup of `method`, when given) or an explicit id
/// (which must be of `method`, when given) to a complete backup.
pub async fn resolve(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
    method: Option<Method>,
) -> Result<Manifest, CatalogError> {
    resolve_before(store, location, backup_id, method, None).await
}

/// How far a base backup may be from a point-in-time restore's target to start it: completed
/// by a time, or consistent (its stop LSN) by a WAL position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    CompletedBy(jiff::Timestamp),
    ConsistentBy(crate::lsn::Lsn),
}

impl Bound {
    fn admits(&self, manifest: &Manifest) -> bool {
        match self {
            Bound::CompletedBy(time) => manifest.completed_at <= *time,
            Bound::ConsistentBy(lsn) => (manifest.physical.as_ref())
                .and_then(|p| crate::lsn::Lsn::parse(&p.stop_lsn).ok())
                .is_some_and(|stop| stop <= *lsn),
        }
    }

    fn describe(&self) -> String {
        match self {
            Bound::CompletedBy(time) => format!(" completed by {time}"),
            Bound::ConsistentBy(lsn) => format!(" consistent by {lsn}"),
        }
    }
}

/// [`resolve`], where `latest` is the newest backup within `bound` (when given): the base
/// backup a point-in-time restore to that time or position starts from. A named id must
/// satisfy the same bound.
pub async fn resolve_before(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
    method: Option<Method>,
    bound: Option<Bound>,
) -> Result<Manifest, CatalogError> {
    resolve_usable(store, location, backup_id, method, bound, &|_| None).await
}

/// [`resolve_before`] among the backups `unusable` finds nothing against (it says why one
/// cannot serve: a base backup on a branch the recovery does not follow). `latest` passes over
/// those; a named one is refused with the reason.
pub async fn resolve_usable(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
    method: Option<Method>,
    bound: Option<Bound>,
    unusable: &(dyn Fn(&Manifest) -> Option<String> + Sync),
) -> Result<Manifest, CatalogError> {
    let in_bound = |m: &Manifest| bound.is_none_or(|b| b.admits(m));
    let described = bound.map_or(String::new(), |b| b.describe());
    if backup_id == "latest" {
        let catalog = load(store, location).await?;
        let fits = |b: &&BackupEntry| {
            method.is_none_or(|m| b.manifest.method() == m) && in_bound(&b.manifest)
        };
        let mut passed = Vec::new();
        let newest = catalog.backups.iter().rev().filter(fits).find(|b| {
            let why = unusable(&b.manifest);
            if let Some(why) = &why {
                passed.push(format!("{}: {why}", b.manifest.backup_id));
            }
            why.is_none()
        });
        return newest.map(|b| b.manifest.clone()).ok_or_else(|| {
            let kind = method.map_or(String::new(), |m| format!("{m} "));
            let passed = match passed.is_empty() {
                true => String::new(),
                false => format!("; passed over {}", passed.join("; ")),
            };
            CatalogError::BackupNotFound(format!(
                "latest (no complete {kind}backup{described} under {}{passed})",
                location.prefix()
            ))
        });
    }
    let manifest = resolve_named(store, location, backup_id, method).await?;
    if !in_bound(&manifest) {
        return Err(CatalogError::BackupNotFound(format!(
            "{backup_id}{described} (it completed at {}, after the target)",
            manifest.completed_at
        )));
    }
    if let Some(reason) = unusable(&manifest) {
        return Err(CatalogError::Unusable {
            backup_id: backup_id.to_owned(),
            reason,
        });
    }
    Ok(manifest)
}

async fn resolve_named(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
    method: Option<Method>,
) -> Result<Manifest, CatalogError> {
    crate::layout::validate_backup_id(backup_id)?;
    let manifest = match store::get_bytes(store, &location.manifest_key(backup_id)).await {
        Ok(bytes) => {
            Manifest::from_json(&bytes).map_err(|source| CatalogError::InvalidManifest {
                backup_id: backup_id.to_string(),
                source,
            })?
        }
        Err(e) if e.is_not_found() => {
            return Err(CatalogError::BackupNotFound(backup_id.to_string()));
        }
        Err(e) => return Err(e.into()),
    };
    match method {
        Some(wanted) if manifest.method() != wanted => Err(CatalogError::WrongMethod {
            backup_id: backup_id.to_owned(),
            found: manifest.method(),
            wanted,
            hint: match wanted {
                Method::Logical => "unpack it with base-restore and recover from the WAL archive",
                Method::Physical => "replay it into a running server with restore",
            },
        }),
        _ => Ok(manifest),
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

/// What [`delete_cluster`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ClusterDeletion {
    pub objects_deleted: usize,
    /// Backup ids left in place: another cluster's, or the one this cluster was restored from.
    pub kept: Vec<String>,
}

/// The operator's `onDelete: Delete` for the WAL archive: every object under the archive of
/// `system_identifier` (this cluster's own system; a predecessor of the same name archived
/// under another identifier, which stays). Returns how many objects went.
pub async fn delete_wal(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system_identifier: u64,
) -> Result<usize, CatalogError> {
    let prefix = location.wal_prefix(system_identifier);
    let mut deleted = 0;
    // Page by page: an archive of any age is deleted holding one page of keys at a time.
    let mut pages = store::Pager::new(store, &prefix, &[]);
    while let Some(page) = pages.next().await? {
        let keys: Vec<String> = page.into_iter().map(|o| o.key).collect();
        store.delete_many(&keys).await?;
        deleted += keys.len();
    }
    Ok(deleted)
}

/// The operator's `onDelete: Delete`: deletes the backup directories under exactly
/// `<path>/<namespace>/<cluster>/` that `owner` may delete, manifests first (no half-deleted
/// backup is ever listed as complete) and claims last (ownership stays readable until the end),
/// then their open multipart uploads.
///
/// Only keys exactly `<prefix><backupId>/<file>` are considered, never the whole prefix: another
/// cluster whose path nests inside this prefix (path `p/ns/db` under `p/ns/db/`) keeps its
/// objects, as do other owners' backups and stray objects someone put there.
pub async fn delete_cluster(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    owner: &Owner,
) -> Result<ClusterDeletion, CatalogError> {
    let prefix = location.prefix();
    let mut by_id: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    let mut pages = backup_objects(store, location);
    while let Some(page) = pages.next().await? {
        for object in page {
            if let Some((id, file)) = location.parse_key(&object.key) {
                let entry = (object.key.clone(), file == CLAIM_FILE);
                by_id.entry(id.to_owned()).or_default().push(entry);
            }
        }
    }
    let mut done = ClusterDeletion::default();
    let (mut manifests, mut claims, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    let mut doomed = BTreeSet::new();
    for (id, keys) in by_id {
        let recorded = recorded_owner(store, location, &id).await?;
        if !owner.may_delete(&id, recorded.as_deref()) {
            done.kept.push(id);
            continue;
        }
        for (key, is_claim) in keys {
            if is_claim {
                claims.push(key);
            } else if key == location.manifest_key(&id) {
                manifests.push(key);
            } else {
                rest.push(key);
            }
        }
        doomed.insert(id);
    }
    done.objects_deleted = manifests.len() + rest.len() + claims.len();
    for keys in [manifests, rest, claims] {
        store.delete_many(&keys).await?;
    }
    for upload in store.pending_uploads(&prefix).await? {
        let Some((id, _)) = location.parse_key(&upload.key) else {
            continue; // a nested cluster's
        };
        let ours = doomed.contains(id)
            || (!done.kept.iter().any(|k| k == id)
                && owner.may_delete(id, recorded_owner(store, location, id).await?.as_deref()));
        if ours {
            store.abort_pending(&upload).await?;
        }
    }
    Ok(done)
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "catalog_scale_tests.rs"]
mod scale_tests;
