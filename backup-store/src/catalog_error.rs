//! Why a catalog operation failed: its own leaf, so that `claim` (which the catalog uses to
//! write a backup id's claim) can fail the same way without depending on the catalog.

use crate::layout::LayoutError;
use crate::store::StoreError;

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
    /// A backup that exists but cannot serve what was asked (a restore along a history it
    /// is not on).
    #[error("backup {backup_id} cannot start this restore: {reason}")]
    Unusable { backup_id: String, reason: String },
    /// A logical backup asked for where a physical one is needed, or the reverse.
    #[error("backup {backup_id} is a {found} backup, not a {wanted} one: {hint}")]
    WrongMethod {
        backup_id: String,
        found: crate::manifest::Method,
        wanted: crate::manifest::Method,
        hint: &'static str,
    },
    #[error("integrity check failed: manifest of {backup_id} is not valid: {source}")]
    InvalidManifest {
        backup_id: String,
        #[source]
        source: serde_json::Error,
    },
    /// Another writer holds this backup id (see [`crate::claim`]).
    #[error(
        "backup id {backup_id} at {at} is taken: {holder}. Two writers share this bucket, path, \
         namespace and cluster name (e.g. the same cluster in two Kubernetes clusters), or the \
         id was reused; give each cluster its own destination path"
    )]
    IdTaken {
        backup_id: String,
        at: String,
        holder: String,
    },
    #[error("encoding {what}: {source}")]
    Encode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}
