//! Which archived segments a span of WAL needs, and which of them the archive lacks: what a base
//! backup waits for before it is complete (`docs/src/design/pitr.md` §4), and the ground the
//! continuity check (§6) stands on.

use std::collections::{BTreeMap, BTreeSet};

pub use crate::lsn::Lsn;
use crate::store::{ObjectStore, Pager};
use crate::wal::{WalArchive, WalError, WalName};

/// A stretch of WAL on one timeline, as PostgreSQL's `backup_manifest` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalSpan {
    pub timeline: u32,
    pub start: Lsn,
    pub end: Lsn,
}

impl WalSpan {
    /// The segments holding this span, in order: from the one with `start` to the one with the
    /// last byte before `end` (an `end` on a segment boundary needs nothing of the next one).
    /// `segment_size` is the server's `wal_segment_size`: a power of two, 1 MiB to 1 GiB.
    pub fn segments(&self, segment_size: u64) -> Result<Vec<WalName>, WalError> {
        if !segment_size.is_power_of_two() || !(1 << 20..=1 << 30).contains(&segment_size) {
            return Err(WalError::SegmentSize(segment_size));
        }
        let per_xlogid = 0x1_0000_0000 / segment_size;
        let first = self.start.0 / segment_size;
        let last = self.end.0.saturating_sub(1).max(self.start.0) / segment_size;
        (first..=last)
            .map(|segment| {
                WalName::parse(&format!(
                    "{:08X}{:08X}{:08X}",
                    self.timeline,
                    segment / per_xlogid,
                    segment % per_xlogid
                ))
            })
            .collect()
    }
}

/// The files of `needed` the archive does not hold, in order. Each timeline's folder is listed
/// from the first needed file to the last only (keys sort as the segments do): a base backup
/// waiting for its WAL costs a request or two, whatever the archive's age, never a listing of
/// the whole timeline (past 100,000 files, the stores' cap, that failed every base backup).
pub async fn missing(
    store: &dyn ObjectStore,
    archive: &WalArchive,
    needed: &[WalName],
) -> Result<Vec<WalName>, WalError> {
    let mut stored = BTreeSet::new();
    let mut by_folder: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in needed {
        let keys = by_folder.entry(archive.folder(file)).or_default();
        keys.push(archive.key(file));
    }
    for (prefix, mut keys) in by_folder {
        keys.sort();
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            continue;
        };
        // Just before the first key: its name without the suffix sorts before it and after
        // every earlier segment's key.
        let mut pages = Pager::new(store, &prefix, &[]).after(first.trim_end_matches(".zst"));
        while let Some(page) = pages.next().await? {
            let past = page.last().is_some_and(|o| &o.key >= last);
            stored.extend(page.into_iter().map(|o| o.key));
            if past {
                break;
            }
        }
    }
    Ok(needed
        .iter()
        .filter(|f| !stored.contains(&archive.key(f)))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB16: u64 = 16 << 20;

    fn names(span: WalSpan, size: u64) -> Vec<String> {
        let segments = span.segments(size).unwrap();
        segments.iter().map(|s| s.as_str().to_owned()).collect()
    }

    #[test]
    fn a_span_needs_every_segment_it_touches() {
        let span = WalSpan {
            timeline: 2,
            start: Lsn::parse("0/2000028").unwrap(),
            end: Lsn::parse("0/4000100").unwrap(),
        };
        assert_eq!(
            names(span, MIB16),
            [
                "000000020000000000000002",
                "000000020000000000000003",
                "000000020000000000000004"
            ]
        );
    }

    #[test]
    fn an_end_on_a_boundary_needs_nothing_of_the_next_segment() {
        let span = WalSpan {
            timeline: 1,
            start: Lsn::parse("0/2000028").unwrap(),
            end: Lsn::parse("0/3000000").unwrap(),
        };
        assert_eq!(names(span, MIB16), ["000000010000000000000002"]);
    }

    #[test]
    fn segment_numbers_roll_over_into_the_high_half() {
        let span = WalSpan {
            timeline: 1,
            start: Lsn::parse("0/FF000000").unwrap(),
            end: Lsn::parse("1/00000010").unwrap(),
        };
        assert_eq!(
            names(span, MIB16),
            ["0000000100000000000000FF", "000000010000000100000000"]
        );
        // 64 MiB segments: 64 per 4 GiB.
        let span = WalSpan {
            timeline: 1,
            start: Lsn::parse("1/FC000000").unwrap(),
            end: Lsn::parse("1/FC000001").unwrap(),
        };
        assert_eq!(names(span, 64 << 20), ["00000001000000010000003F"]);
    }

    #[test]
    fn impossible_segment_sizes_are_refused() {
        let span = WalSpan {
            timeline: 1,
            start: Lsn(0),
            end: Lsn(1),
        };
        for size in [0, 3 << 20, 1 << 19, 1 << 31] {
            assert!(span.segments(size).is_err(), "{size} accepted");
        }
    }
}
