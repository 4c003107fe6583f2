//! Verification restore points (issue 28): a named restore point the primary writes after each
//! base backup, with every table's row count at exactly that point, kept beside the archive of
//! its system (`wal/<system>/points/<name>.json`). The verification of a physical backup
//! recovers to the newest one after the backup and compares its counts.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::lsn::Lsn;
use crate::manifest::TableCount;
use crate::store::{self, ObjectStore};
use crate::wal::{WalArchive, WalError};

/// One restore point and the counts that hold there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestorePoint {
    /// `recovery_target_name`: `tusk-verify-<Unix seconds>` (unique: a recovery stops at the
    /// first point of its name).
    pub name: String,
    /// Where the point's record is (`X/Y`).
    pub lsn: String,
    pub timeline: u32,
    pub created_at: jiff::Timestamp,
    /// Every database's user tables and their exact row counts at the point.
    pub databases: BTreeMap<String, Vec<TableCount>>,
}

impl RestorePoint {
    pub fn lsn(&self) -> Option<Lsn> {
        Lsn::parse(&self.lsn).ok()
    }
}

/// The name of a point written at `now`.
pub fn point_name(now: jiff::Timestamp) -> String {
    format!("tusk-verify-{:012}", now.as_second())
}

/// Stores `point` (create-only: a name is written once).
pub async fn put(
    store: &dyn ObjectStore,
    archive: &WalArchive,
    point: &RestorePoint,
) -> Result<(), WalError> {
    let body = serde_json::to_vec(point).map_err(|e| WalError::Damaged {
        name: point.name.clone(),
        reason: e.to_string(),
    })?;
    store
        .put_if_absent(&archive.point_key(&point.name), Bytes::from(body))
        .await?;
    Ok(())
}

/// The newest point of the archive (names sort by time), if any.
pub async fn newest(
    store: &dyn ObjectStore,
    archive: &WalArchive,
) -> Result<Option<RestorePoint>, WalError> {
    let prefix = archive.point_key("");
    let prefix = prefix.trim_end_matches(".json");
    let mut keys: Vec<String> = store
        .list(prefix)
        .await?
        .into_iter()
        .map(|o| o.key)
        .filter(|k| k.ends_with(".json"))
        .collect();
    keys.sort();
    let Some(key) = keys.pop() else {
        return Ok(None);
    };
    let bytes = store::get_bytes(store, &key).await?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| WalError::Damaged {
            name: key,
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_time() {
        let early = point_name(jiff::Timestamp::from_second(999_999_999).unwrap());
        let late = point_name(jiff::Timestamp::from_second(1_800_000_000).unwrap());
        assert!(early < late, "{early} {late}");
        assert_eq!(late, "tusk-verify-001800000000");
    }
}
