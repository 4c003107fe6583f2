//! The disk policy (docs/src/design/pitr.md §7): what the archiver does when the bucket fails and
//! the WAL it holds back fills the data volume. The anchors leave this to the user, and their
//! users' most reported failure is a volume filled by WAL the archive could not take.
//!
//! Tusk decides, by the **volume's fill**, not by the WAL's share of it: the database's own
//! files share the volume, and what stops the primary is the volume filling, whatever fills it.
//! A policy on the WAL's share alone would let a volume 70 % full of data run out before the
//! WAL reached its threshold.
//!
//! - Below `warn_at` (the threshold less 20 points): a failing archive keeps every file and
//!   PostgreSQL retries it, as always.
//! - From `warn_at`: the same, with a Warning Event (`ArchiveBacklogHigh`) once per outage.
//! - From the threshold (`walArchive.gapAtVolumePercent`, default 80; 100 never): **the archive
//!   gives way, the database does not**. A file the bucket refuses is acknowledged to
//!   PostgreSQL unarchived, so it can recycle WAL, and recorded in a gap marker.
//!   While the gap is open and the volume stays above the threshold less [`HYSTERESIS`], the
//!   bucket is probed at most every [`PROBE_EVERY`] and the other files give way at once: a
//!   bucket that hangs (120 s per try) must not turn the backlog's drain into a trickle.
//! - Only an **outage** gives way: uploads failing for [`MIN_OUTAGE`] without one success, with
//!   the bucket's own errors. One 503 or one timeout is a hiccup PostgreSQL's retry rides out;
//!   a conflict (other bytes stored under the name: two writers of one timeline), a damaged
//!   file or a local error never gives way: releasing WAL would not cure them.

use std::path::Path;
use std::time::Duration;

/// The threshold's variable in the pod (from `walArchive.gapAtVolumePercent`).
pub const GAP_AT_ENV: &str = "TUSK_ARCHIVE_GAP_AT_PERCENT";
/// The default threshold: room for a checkpoint and for the slots of lagging replicas, which
/// `max_slot_wal_keep_size` bounds to half the volume.
pub const DEFAULT_GAP_AT: u8 = 80;
/// Points below the threshold at which a backlog earns a Warning.
pub const WARN_BELOW: u8 = 20;
/// Points below the threshold the volume must fall before an open gap stops giving way at once:
/// recycling waits for a checkpoint, so the fill falls some time after the gap opens.
pub const HYSTERESIS: u8 = 5;
/// How often, during a gap, the bucket is tried again.
pub const PROBE_EVERY: Duration = Duration::from_secs(10);
/// How long uploads must have failed, without a success between, before a file may give way.
pub const MIN_OUTAGE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskPolicy {
    /// Percent of the volume used from which the archive gives way; 100: never.
    pub gap_at: u8,
    /// How long the bucket must have failed before the first file gives way.
    pub min_outage: Duration,
}

impl Default for DiskPolicy {
    fn default() -> Self {
        Self {
            gap_at: DEFAULT_GAP_AT,
            min_outage: MIN_OUTAGE,
        }
    }
}

impl DiskPolicy {
    /// The policy the operator set ([`GAP_AT_ENV`]), else the default.
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(GAP_AT_ENV) {
            Err(_) => Ok(Self::default()),
            Ok(text) => match text.trim().parse::<u8>() {
                Ok(gap_at) if (1..=100).contains(&gap_at) => Ok(Self {
                    gap_at,
                    ..Self::default()
                }),
                _ => Err(format!("{GAP_AT_ENV}={text:?}: a percent from 1 to 100")),
            },
        }
    }

    fn never(&self) -> bool {
        self.gap_at >= 100
    }

    /// The fill from which a failing archive earns a Warning.
    pub fn warn_at(&self) -> u8 {
        self.gap_at.saturating_sub(WARN_BELOW)
    }

    /// Before an upload: whether the file gives way at once, untried. Only during a gap, while
    /// the volume is still nearly full, and only until the next probe is due.
    pub fn gives_way_untried(&self, used: u8, gap_open: bool, since_failure: Duration) -> bool {
        !self.never()
            && gap_open
            && used >= self.gap_at.saturating_sub(HYSTERESIS)
            && since_failure < PROBE_EVERY
    }

    /// After a failed upload, the bucket failing for `outage` without a success: whether the
    /// file gives way (is acknowledged unarchived). An open gap is an outage already.
    pub fn gives_way(&self, used: u8, gap_open: bool, outage: Duration) -> bool {
        let at = match gap_open {
            true => self.gap_at.saturating_sub(HYSTERESIS),
            false => self.gap_at,
        };
        !self.never() && used >= at && (gap_open || outage >= self.min_outage)
    }
}

/// The share of `path`'s volume in use, in percent rounded up, as `df` shows it (space kept
/// for root counts as unavailable: the postgres user cannot write there).
pub fn used_percent(path: &Path) -> std::io::Result<u8> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path and a buffer statvfs fills on success.
    if unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the buffer.
    let stat = unsafe { stat.assume_init() };
    Ok(percent(
        stat.f_blocks.saturating_sub(stat.f_bfree),
        stat.f_bavail,
    ))
}

fn percent(used: u64, available: u64) -> u8 {
    let total = used.saturating_add(available);
    if total == 0 {
        return 0;
    }
    let percent = (u128::from(used) * 100).div_ceil(u128::from(total));
    u8::try_from(percent.min(100)).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRESH: Duration = Duration::from_secs(1);
    const STALE: Duration = Duration::from_secs(11);

    #[test]
    fn a_failing_archive_gives_way_only_from_the_threshold_and_never_at_100() {
        let policy = DiskPolicy::default();
        assert_eq!(policy.warn_at(), 60);
        let outage = MIN_OUTAGE;
        assert!(!policy.gives_way(79, false, outage));
        assert!(policy.gives_way(80, false, outage));
        assert!(
            !policy.gives_way(99, false, Duration::from_secs(5)),
            "one failure moments ago is no outage, however full the volume"
        );
        // An open gap stays open until the volume falls 5 points below.
        assert!(policy.gives_way(76, true, Duration::ZERO));
        assert!(!policy.gives_way(74, true, outage));
        let never = DiskPolicy {
            gap_at: 100,
            ..DiskPolicy::default()
        };
        assert!(!never.gives_way(100, true, outage));
        assert!(!never.gives_way_untried(100, true, FRESH));
    }

    #[test]
    fn during_a_gap_files_give_way_untried_until_the_next_probe() {
        let policy = DiskPolicy::default();
        assert!(policy.gives_way_untried(90, true, FRESH));
        assert!(!policy.gives_way_untried(90, true, STALE), "probe due");
        assert!(!policy.gives_way_untried(90, false, FRESH), "no gap open");
        assert!(!policy.gives_way_untried(70, true, FRESH), "volume fell");
    }

    #[test]
    fn the_threshold_comes_from_the_pod_and_is_checked() {
        // One test owns the variable: tests run in parallel within this binary.
        unsafe { std::env::remove_var(GAP_AT_ENV) };
        assert_eq!(DiskPolicy::from_env(), Ok(DiskPolicy::default()));
        unsafe { std::env::set_var(GAP_AT_ENV, "90") };
        assert_eq!(
            DiskPolicy::from_env(),
            Ok(DiskPolicy {
                gap_at: 90,
                ..DiskPolicy::default()
            })
        );
        for bad in ["0", "101", "eighty"] {
            unsafe { std::env::set_var(GAP_AT_ENV, bad) };
            assert!(DiskPolicy::from_env().is_err(), "{bad}");
        }
        unsafe { std::env::remove_var(GAP_AT_ENV) };
    }

    #[test]
    fn the_fill_is_rounded_up_like_df() {
        assert_eq!(percent(0, 0), 0);
        assert_eq!(percent(1, 99), 1);
        assert_eq!(percent(801, 199), 81);
        assert_eq!(percent(50, 0), 100);
        let here = used_percent(Path::new("/")).expect("statvfs");
        assert!(here <= 100);
    }
}
