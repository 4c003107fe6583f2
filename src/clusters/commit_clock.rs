//! The newest commit an archive holds, for a restore to a time. PostgreSQL stops such a
//! recovery only at a commit (or abort) stamped after the target: with none in the WAL it
//! replays everything and fails. The upload time of the newest file says nothing of the
//! commits inside it (issue 46, defect 6: a target between the last commit and the upload was
//! admitted, then failed after the whole download; points and other objects counted as WAL).
//! So the newest segments are read back, newest first, until one holds a commit.

use backup_store::layout::ClusterLocation;
use backup_store::store::{ObjectInfo, ObjectStore};
use backup_store::wal::{self, WalArchive, WalError, WalName};
use backup_store::wal_records;
use k8s_openapi::jiff::Timestamp;

use crate::runtime::buckets::BucketError;

/// How many of the newest segments are read looking for a commit. Segments without one are
/// a base backup's, a restore point's, a switch's: a few in a row, unless the source is idle,
/// when it also writes no new segments.
pub const SCANNED: usize = 8;

/// The newest commit found, and the segment that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewestCommit {
    pub at: Timestamp,
    pub segment: String,
}

/// What reading the newest segments found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Clock {
    Commit(NewestCommit),
    /// No commit in the newest [`SCANNED`] segments (or none holds WAL this reader knows):
    /// the archive's upload times are all there is to judge by.
    Unknown,
}

/// The WAL segments of a listing (`<prefix><timeline>/<24 hex>.zst`): no history files, gap
/// markers, restore points, partial segments or backup labels.
pub fn segments(wal: &[ObjectInfo]) -> impl Iterator<Item = (&ObjectInfo, &str)> {
    wal.iter().filter_map(|o| {
        let name = o.key.rsplit('/').next()?.strip_suffix(".zst")?;
        let hex = name.len() == 24 && name.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then_some((o, name))
    })
}

/// The newest segments of `wal`, newest first, one per position: where two timelines hold the
/// same position, the newer timeline's (the recovery follows the newest).
pub fn newest_first(wal: &[ObjectInfo]) -> Vec<&str> {
    let mut names: Vec<&str> = segments(wal).map(|(_, name)| name).collect();
    // The position is the name after its timeline; then the timeline, newest first.
    names.sort_by(|a, b| b[8..].cmp(&a[8..]).then(b[..8].cmp(&a[..8])));
    names.dedup_by(|later, kept| later[8..] == kept[8..]);
    names
}

/// Reads the newest segments of system `system`'s archive (`wal`: its listing from the base
/// backup on) until one holds a commit, at most [`SCANNED`].
pub async fn read(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system: u64,
    wal: &[ObjectInfo],
) -> Result<Clock, BucketError> {
    let archive = WalArchive::new(location, system);
    for name in newest_first(wal).into_iter().take(SCANNED) {
        let Ok(file) = WalName::parse(name) else {
            continue;
        };
        let bytes = match wal::fetch(store, &archive, &file).await {
            Ok(Some(bytes)) => bytes,
            // Deleted since the listing, or not a segment this reader can unpack: no word.
            Ok(None) | Err(WalError::Damaged { .. }) => continue,
            Err(e) => return Err(BucketError::Wal(e)),
        };
        if let Some(at) = wal_records::segment_times(&bytes).newest_commit {
            let segment = name.to_owned();
            return Ok(Clock::Commit(NewestCommit { at, segment }));
        }
    }
    Ok(Clock::Unknown)
}

#[cfg(test)]
#[path = "commit_clock_tests.rs"]
mod tests;
