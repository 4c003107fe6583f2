//! Exactly one writer per backup id. Two clusters with the same bucket, path, namespace and
//! name (a DR pair, a re-created cluster) produce the same ids: the Job name, or the start
//! minute. Before writing anything, a backup creates `claim.json` in its directory with a
//! create-only write; a second writer finds it taken and fails before it uploads a byte, so it
//! neither overwrites the first one's dumps nor deletes them when it cleans up. The manifest is
//! created the same way, so even a writer that skipped the claim (an older agent) cannot
//! replace a complete backup.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::catalog_error::CatalogError;
use crate::layout::ClusterLocation;
use crate::manifest::Manifest;
use crate::store::{self, ObjectStore};

pub const CLAIM_FILE: &str = "claim.json";

/// Who is writing a backup id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// The writing PostgreSQL's `metadata.uid` (see [`Manifest::cluster_uid`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_uid: Option<String>,
    /// What stays the same across retries of one run and differs between runs: the operator
    /// passes the Job's uid, so a pod retried by its Job takes over its own claim. Without it a
    /// taken claim is never taken over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
    pub claimed_at: jiff::Timestamp,
}

impl Claim {
    /// Whether `self`, found in the bucket, was made by the same run as `ours`.
    fn same_run(&self, ours: &Claim) -> bool {
        ours.writer.is_some() && self.writer == ours.writer && self.cluster_uid == ours.cluster_uid
    }

    fn describe(&self) -> String {
        format!(
            "claimed at {} by cluster uid {} (writer {})",
            self.claimed_at,
            self.cluster_uid.as_deref().unwrap_or("unknown"),
            self.writer.as_deref().unwrap_or("unknown")
        )
    }
}

/// Claims `backup_id` for `claim`'s writer, or fails with [`CatalogError::IdTaken`].
pub async fn claim(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
    claim: &Claim,
) -> Result<(), CatalogError> {
    let key = location.object_key(backup_id, CLAIM_FILE);
    let body = serde_json::to_vec_pretty(claim).map_err(|source| CatalogError::Encode {
        what: key.clone(),
        source,
    })?;
    match store.put_if_absent(&key, Bytes::from(body)).await {
        Ok(()) => return Ok(()),
        Err(e) if e.is_already_exists() => {}
        Err(e) => return Err(e.into()),
    }
    let found = store::get_bytes(store, &key).await?;
    let holder = match serde_json::from_slice::<Claim>(&found) {
        Ok(theirs) if theirs.same_run(claim) => {
            tracing::info!(
                backup_id,
                "taking over this run's own claim (a retried pod)"
            );
            return Ok(());
        }
        Ok(theirs) => theirs.describe(),
        Err(_) => "an unreadable claim".to_owned(),
    };
    Err(taken(store, location, backup_id, holder))
}

/// Removes our claim after a failed run, so the id is free again.
pub async fn release(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
) -> Result<(), CatalogError> {
    let key = location.object_key(backup_id, CLAIM_FILE);
    store.delete_many(std::slice::from_ref(&key)).await?;
    Ok(())
}

/// Writes the manifest, which makes the backup exist, only if none exists.
pub async fn create_manifest(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    manifest: &Manifest,
) -> Result<(), CatalogError> {
    let key = location.manifest_key(&manifest.backup_id);
    let body = manifest.to_json().map_err(|source| CatalogError::Encode {
        what: key.clone(),
        source,
    })?;
    match store.put_if_absent(&key, Bytes::from(body.clone())).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_already_exists() => {
            // A client retry of our own write that had succeeded finds our bytes there.
            if store::get_bytes(store, &key).await? == body {
                return Ok(());
            }
            let holder = "a complete backup written by another writer".to_owned();
            Err(taken(store, location, &manifest.backup_id, holder))
        }
        Err(e) => Err(e.into()),
    }
}

/// The owner a backup directory records: its manifest's, else its claim's; `None` when neither
/// names one (written before identities) or neither can be read.
pub async fn recorded_owner(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
) -> Result<Option<String>, CatalogError> {
    if let Some(bytes) = get_if_present(store, &location.manifest_key(backup_id)).await?
        && let Ok(manifest) = Manifest::from_json(&bytes)
    {
        return Ok(manifest.cluster_uid);
    }
    let claim_key = location.object_key(backup_id, CLAIM_FILE);
    Ok(get_if_present(store, &claim_key)
        .await?
        .and_then(|bytes| serde_json::from_slice::<Claim>(&bytes).ok())
        .and_then(|c| c.cluster_uid))
}

async fn get_if_present(
    store: &dyn ObjectStore,
    key: &str,
) -> Result<Option<Vec<u8>>, CatalogError> {
    match store::get_bytes(store, key).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn taken(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
    holder: String,
) -> CatalogError {
    CatalogError::IdTaken {
        backup_id: backup_id.to_owned(),
        at: format!("{}/{}", store.location(), location.backup_prefix(backup_id)),
        holder,
    }
}
