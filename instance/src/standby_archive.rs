//! What a standby answers PostgreSQL's archiver (issue 46, defect 9). With `archive_mode =
//! always` a standby asks for every file it receives, and hears that it is archived only once
//! the bucket holds it (the primary's upload). Until then PostgreSQL keeps the file `.ready`
//! and recycles none of it, so WAL a primary dies without archiving stays on the standby, and
//! after the promotion its PostgreSQL archives it as any primary does. Before, a standby marked
//! what it received as archived: a restartpoint recycled the tail, or the checkpoint after
//! the promotion did, racing the manager's heal.
//!
//! A file goes without the bucket holding it when no one ever archives it under its name (the
//! end of a timeline a promotion abandoned, which the new timeline holds; a file a standby
//! does not write), when a gap marker says the primary released it, and when the standby's
//! volume reaches the disk policy's threshold: its copy is the second one, and the primary
//! records any gap of its own. A server restoring from a backup lets every file go: what it
//! replays is the source's archive, not its own.

use std::time::Instant;

use backup_store::continuity::{self, Stretch};
use backup_store::lsn::Lsn;

use super::*;

/// How long one request waits for the primary's upload before PostgreSQL is told to try again
/// (it keeps the file, and asks again at the next file or within a minute).
const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_secs(1);

/// Whether the bucket must hold `name` before a standby whose newest history is `stretches`
/// (oldest first; empty: no history file, timeline 1) lets its copy go.
pub(crate) fn needs_bucket(name: &str, stretches: &[Stretch], segment_size: u64) -> bool {
    if name.ends_with(".history") {
        return true;
    }
    // `.partial` and `.backup` files: a promotion and a base backup write them, on a primary.
    let Some(timeline) = name.get(..8).filter(|_| name.len() == 24) else {
        return false;
    };
    let (Ok(timeline), Some(start)) = (
        u32::from_str_radix(timeline, 16),
        Lsn::of_segment(name, segment_size),
    ) else {
        return false;
    };
    let Some(newest) = stretches.last() else {
        return true;
    };
    match stretches.iter().find(|s| s.timeline == timeline) {
        // Up to its switch point: a segment holding the switch is read from the new timeline.
        Some(stretch) => stretch
            .ends
            .is_none_or(|end| start.0.saturating_add(segment_size) <= end.0),
        // A newer timeline than this server has read the history of: the primary's.
        None => timeline > newest.timeline,
    }
}

/// Whether a gap marker named `marker` (`<first>-<last>`, the disk policy's) covers `name`.
pub(crate) fn in_gap(marker: &str, name: &str) -> bool {
    marker.split_once('-').is_some_and(|(first, last)| {
        first.len() == 24
            && first[..8] == name[..8.min(name.len())]
            && first <= name
            && name <= last
    })
}

/// The stretches of the newest timeline history in `pg_wal` (none: timeline 1).
fn local_history(pg_wal: &Path) -> Result<Vec<Stretch>, String> {
    let entries = std::fs::read_dir(pg_wal).map_err(|e| format!("{}: {e}", pg_wal.display()))?;
    let newest = entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            u32::from_str_radix(name.strip_suffix(".history")?, 16).ok()
        })
        .max();
    let Some(newest) = newest else {
        return Ok(Vec::new());
    };
    let path = pg_wal.join(format!("{newest:08X}.history"));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    continuity::stretches(newest, &text)
}

/// Whether the server at `pgdata` runs as a standby, or restores a backup.
pub(crate) fn recovering(pgdata: &Path) -> Option<Recovery> {
    if pgdata.join("standby.signal").exists() {
        Some(Recovery::Standby)
    } else if pgdata.join("recovery.signal").exists() {
        Some(Recovery::Restore)
    } else {
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recovery {
    Standby,
    Restore,
}

impl Archiver {
    /// A standby's answer for `name` at `path` (see the module): `Ok` once its copy may go, an
    /// error while the primary has not archived it (PostgreSQL keeps the file and asks again).
    pub(super) async fn hold(&self, name: &WalName, path: &Path) -> Result<Archived, String> {
        let segment_size = std::fs::metadata(path).map_or(0, |m| m.len());
        let stretches = local_history(&self.pgdata.join("pg_wal"))?;
        if !needs_bucket(name.as_str(), &stretches, segment_size) {
            return Ok(Archived::NotArchivable);
        }
        let deadline = Instant::now() + WAIT;
        let mut why = "the primary has not archived it yet".to_owned();
        loop {
            if recovering(&self.pgdata) != Some(Recovery::Standby) {
                // Promoted while waiting: PostgreSQL asks again, and this server uploads.
                return Err("promoted while waiting for the primary's upload".into());
            }
            match self.in_bucket(name).await {
                Ok(Some(answer)) => {
                    // The bucket answers: a gap this server opened as primary (just before a
                    // failover) closes and its marker goes up now, where it waited on this
                    // volume for this server's next upload as primary.
                    let closed = self.guard.after_success(self.events.as_ref());
                    self.upload_markers(closed).await;
                    return Ok(answer);
                }
                Ok(None) => {}
                Err(e) => {
                    why = format!("the bucket cannot say whether the primary archived it: {e}")
                }
            }
            if self.guard.used() >= Some(self.guard.policy().gap_at) {
                tracing::warn!(
                    file = name.as_str(),
                    "the volume is at the disk policy's threshold: let go of a file the primary \
                     has not archived (the primary keeps its own copy)"
                );
                return Ok(Archived::Released);
            }
            if Instant::now() >= deadline {
                return Err(format!("kept until the bucket holds it: {why}"));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// `ByPrimary` when the bucket holds `name`, `NotArchivable` when a gap marker covers it.
    async fn in_bucket(&self, name: &WalName) -> Result<Option<Archived>, String> {
        let opened = self.open().await?;
        let system = wal::system_identifier(&self.pgdata).map_err(|e| e.to_string())?;
        let archive = WalArchive::new(&opened.location, system);
        let key = archive.key(name);
        let found = opened.store.list_page(&key, None).await;
        if found
            .map_err(|e| e.to_string())?
            .iter()
            .any(|o| o.key == key)
        {
            return Ok(Some(Archived::ByPrimary));
        }
        let gaps = archive.gap_key("");
        let gaps = gaps.trim_end_matches(".json");
        let markers = opened.store.list(gaps).await.map_err(|e| e.to_string())?;
        let covered = markers.iter().any(|o| {
            let marker = o.key[gaps.len()..].trim_end_matches(".json");
            in_gap(marker, name.as_str())
        });
        Ok(covered.then_some(Archived::NotArchivable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 16 << 20;

    fn after_one_switch() -> Vec<Stretch> {
        // Timeline 1 ended inside segment 5 (0/5000060); timeline 2 is the newest.
        continuity::stretches(2, "1\t0/5000060\tno recovery target specified\n").unwrap()
    }

    #[test]
    fn a_standby_waits_for_the_bucket_for_its_timelines_up_to_each_switch() {
        let history = after_one_switch();
        assert!(needs_bucket("000000010000000000000004", &history, SIZE));
        assert!(needs_bucket("000000020000000000000005", &history, SIZE));
        assert!(needs_bucket("000000020000000000000009", &history, SIZE));
        assert!(needs_bucket("00000002.history", &history, SIZE));
        // A newer timeline than the standby has read: the primary's, archived by it.
        assert!(needs_bucket("000000030000000000000009", &history, SIZE));
        // No history file: timeline 1, every segment.
        assert!(needs_bucket("000000010000000000000009", &[], SIZE));
    }

    #[test]
    fn what_no_one_archives_under_its_name_goes_at_once() {
        let history = after_one_switch();
        // The segment holding the switch, and past it, on the abandoned timeline.
        assert!(!needs_bucket("000000010000000000000005", &history, SIZE));
        assert!(!needs_bucket("000000010000000000000006", &history, SIZE));
        // A branch the newest history does not go through.
        let on_three = continuity::stretches(3, "1\t0/5000060\tx\n").unwrap();
        assert!(!needs_bucket("000000020000000000000006", &on_three, SIZE));
        assert!(!needs_bucket(
            "000000010000000000000005.partial",
            &history,
            SIZE
        ));
        assert!(!needs_bucket(
            "000000010000000000000003.00000028.backup",
            &history,
            SIZE
        ));
    }

    #[test]
    fn a_switch_on_a_segment_boundary_leaves_the_segment_before_it_needed() {
        let history = continuity::stretches(2, "1\t0/6000000\tx\n").unwrap();
        assert!(needs_bucket("000000010000000000000005", &history, SIZE));
        assert!(!needs_bucket("000000010000000000000006", &history, SIZE));
    }

    #[test]
    fn a_gap_marker_covers_its_timeline_between_its_ends() {
        let marker = "000000010000000000000004-000000010000000000000007";
        assert!(in_gap(marker, "000000010000000000000004"));
        assert!(in_gap(marker, "000000010000000000000006"));
        assert!(in_gap(marker, "000000010000000000000007"));
        assert!(!in_gap(marker, "000000010000000000000008"));
        assert!(!in_gap(marker, "000000020000000000000005"));
        assert!(!in_gap("at-1700000000", "000000010000000000000005"));
    }
}
