//! Retention by recovery window (`retention.recoveryWindow`, docs/src/design/pitr.md §6): every
//! point of the last `window` stays restorable, and the base backups and WAL no restore to such
//! a point needs are deleted together.
//!
//! A restore to a point starts from the newest base backup completed by then and replays WAL
//! from that backup's start. So the window keeps every base backup completed inside it, plus the
//! newest one completed before it (where a restore to the window's first second starts), and
//! the WAL from the oldest kept base backup's start on. History files always stay: they are
//! small, and a restore follows timelines through them.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::catalog_error::CatalogError;
use crate::layout::ClusterLocation;
use crate::lsn::Lsn;
use crate::manifest::PhysicalBackup;
use crate::retention::Candidate;
use crate::store::{self, ObjectStore};

/// The base backups to delete, oldest first. None while no base backup is older than the
/// window; the newest is never deleted.
pub fn select_for_deletion(
    mut backups: Vec<Candidate>,
    window: Duration,
    now: jiff::Timestamp,
) -> Vec<Candidate> {
    crate::retention::newest_first(&mut backups);
    let start = window_start(window, now);
    let Some(anchor) = backups.iter().position(|b| b.completed_at <= start) else {
        return Vec::new();
    };
    let mut doomed = backups.split_off(anchor + 1);
    doomed.reverse();
    doomed
}

/// Base backups that start no restore inside the window (on a branch its history left), to
/// delete once they completed before it, oldest first.
pub fn older_than_window(
    mut backups: Vec<Candidate>,
    window: Duration,
    now: jiff::Timestamp,
) -> Vec<Candidate> {
    let start = window_start(window, now);
    backups.retain(|b| b.completed_at <= start);
    crate::retention::newest_first(&mut backups);
    backups.reverse();
    backups
}

fn window_start(window: Duration, now: jiff::Timestamp) -> jiff::Timestamp {
    let seconds = i64::try_from(window.as_secs()).unwrap_or(i64::MAX);
    now.checked_sub(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(jiff::Timestamp::MIN)
}

/// Where one system's kept base backups start: its WAL before that is needed by none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Floor {
    pub system_identifier: u64,
    pub start: Lsn,
    pub segment_size: u64,
}

/// A floor for each system that has a kept base backup of ours: the oldest start among every
/// kept base backup of that system (`all`: a peer's on the same system still needs its WAL).
/// A system whose segment size or start is unknown gets none: nothing of it is deleted.
pub fn floors(ours: &[PhysicalBackup], all: &[PhysicalBackup]) -> Vec<Floor> {
    let mut by_system: BTreeMap<&str, (Option<Lsn>, Option<u64>, bool)> = BTreeMap::new();
    for backup in all {
        let entry = by_system
            .entry(backup.system_identifier.as_str())
            .or_insert((None, None, true));
        match (Lsn::parse(&backup.start_lsn), entry.2) {
            (Ok(start), true) => entry.0 = Some(entry.0.map_or(start, |s| s.min(start))),
            // An unreadable start: this system's floor is unknown.
            _ => entry.2 = false,
        }
        entry.1 = entry.1.or(backup.wal_segment_size);
    }
    let systems: std::collections::BTreeSet<&str> =
        ours.iter().map(|b| b.system_identifier.as_str()).collect();
    systems
        .into_iter()
        .filter_map(|system| {
            let (start, size, readable) = by_system.get(system)?;
            Some(Floor {
                system_identifier: system.parse().ok()?,
                start: start.filter(|_| *readable)?,
                segment_size: (*size)?,
            })
        })
        .collect()
}

/// Deletes the WAL files of `floor`'s system, on every timeline, whose segment ends at or
/// before the floor. Returns how many went. Listed a page at a time, and each timeline's
/// folder only up to the floor (keys sort as the segments do): a pass costs what arrived since
/// the last one, not the archive's age (the whole listing failed past 100,000 files).
pub async fn delete_wal_before(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    floor: &Floor,
) -> Result<usize, CatalogError> {
    let prefix = location.wal_prefix(floor.system_identifier);
    // (folder, name) of a key, and whether it is a segment before the floor.
    let parse = |key: &str| -> Option<(String, bool)> {
        let (folder, name) = key.strip_prefix(&prefix)?.split_once('/')?;
        let segment = Lsn::of_segment(name, floor.segment_size);
        let before =
            segment.is_some_and(|s| s.0.saturating_add(floor.segment_size) <= floor.start.0);
        Some((folder.to_owned(), folder != "history" && before))
    };
    let timeline_folder =
        |folder: &str| folder.len() == 8 && folder.bytes().all(|b| b.is_ascii_hexdigit());
    let mut deleted = 0;
    let mut pages = store::Pager::new(store, &prefix, &[]);
    while let Some(page) = pages.next().await? {
        let mut doomed = Vec::new();
        for object in &page {
            match parse(&object.key) {
                Some((_, true)) => doomed.push(object.key.clone()),
                // The first segment past the floor: the rest of its timeline's folder is too
                // (and the rest of this page is listed again after that folder).
                Some((folder, false)) if timeline_folder(&folder) => {
                    pages.jump_past(&format!("{prefix}{folder}/"));
                    break;
                }
                _ => {}
            }
        }
        store.delete_many(&doomed).await?;
        deleted += doomed.len();
    }
    tracing::info!(system = floor.system_identifier, before = %floor.start, files = deleted, "deleted WAL no kept base backup needs");
    Ok(deleted)
}

#[cfg(test)]
#[path = "recovery_window_tests.rs"]
mod tests;
