//! The archive continuity check (issue 28, docs/pitr-design.md §6): does the archive of one
//! database system hold every file a restore from its oldest base backup to its newest archived
//! segment needs? It follows the newest timeline's history back through each switch, and names
//! what is missing: segments (those a gap marker explains apart), history files, and files whose
//! first page belongs to another system.
//!
//! The walk itself ([`walk`]) is a pure function of what was listed; [`check`] lists and reads.

use std::collections::{BTreeMap, BTreeSet};

use async_compression::tokio::bufread::ZstdDecoder;
use tokio::io::AsyncReadExt;
pub use tusk_contract::status::ArchiveContinuity;

use crate::catalog;
use crate::layout::ClusterLocation;
use crate::lsn::Lsn;
use crate::store::{self, ObjectStore};
use crate::wal::{WalArchive, WalError, WalName};

/// How many missing segments a report names (the count says how many there are).
pub const NAMED: usize = 20;
/// PostgreSQL's default `wal_segment_size`, for a system whose base backups do not record one.
pub const DEFAULT_SEGMENT_SIZE: u64 = 16 << 20;

/// What the archive of one system holds, from one listing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Holdings {
    /// Whole segments (not `.partial`), by timeline.
    pub segments: BTreeMap<u32, BTreeSet<String>>,
    /// Timelines with a history file.
    pub histories: BTreeSet<u32>,
    /// Gap markers (`<first>-<last>`) the disk policy left.
    pub gaps: Vec<(String, String)>,
}

impl Holdings {
    /// Sorts the keys listed under `prefix` (the system's archive) into segments, history
    /// files and gap markers; anything else (partial segments, backup history files) is not
    /// needed by a restore and is passed over.
    pub fn from_keys<'a>(prefix: &str, keys: impl IntoIterator<Item = &'a str>) -> Self {
        let mut holdings = Self::default();
        holdings.add(prefix, keys);
        holdings
    }

    /// Sorts more keys in (one page of a listing).
    pub fn add<'a>(&mut self, prefix: &str, keys: impl IntoIterator<Item = &'a str>) {
        let holdings = self;
        for key in keys {
            let Some(rest) = key.strip_prefix(prefix) else {
                continue;
            };
            if let Some(marker) = rest
                .strip_prefix("gaps/")
                .and_then(|m| m.strip_suffix(".json"))
            {
                if let Some((first, last)) = marker.split_once('-') {
                    holdings.gaps.push((first.to_owned(), last.to_owned()));
                }
                continue;
            }
            let Some(name) = rest.rsplit('/').next().and_then(|n| n.strip_suffix(".zst")) else {
                continue;
            };
            if let Some(timeline) = name.strip_suffix(".history") {
                holdings.histories.extend(timeline_of(timeline));
            } else if name.len() == 24
                && WalName::parse(name).is_ok()
                && let Some(timeline) = timeline_of(&name[..8])
            {
                let on = holdings.segments.entry(timeline).or_default();
                on.insert(name.to_owned());
            }
        }
    }

    fn newest_timeline(&self) -> Option<u32> {
        let segments = self.segments.keys().next_back().copied();
        segments.max(self.histories.iter().next_back().copied())
    }
}

fn timeline_of(hex: &str) -> Option<u32> {
    (hex.len() == 8).then(|| u32::from_str_radix(hex, 16).ok())?
}

/// One timeline's stretch of the newest history: from where it began to where the next one
/// switched away (`None`: it is the newest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stretch {
    pub timeline: u32,
    pub begins: Lsn,
    pub ends: Option<Lsn>,
}

/// The stretches of `newest`'s history, oldest first, from its history file's lines
/// (`<parent>\t<switch point>\t<reason>`): each parent ends where the next timeline begins.
pub fn stretches(newest: u32, history: &str) -> Result<Vec<Stretch>, String> {
    let mut out: Vec<Stretch> = Vec::new();
    let mut begins = Lsn(0);
    for line in history.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let parsed = fields
            .next()
            .and_then(|t| t.parse::<u32>().ok())
            .zip(fields.next().and_then(|l| Lsn::parse(l).ok()));
        let Some((timeline, switch)) = parsed else {
            return Err(format!(
                "the history of timeline {newest} has a line {line:?}"
            ));
        };
        out.push(Stretch {
            timeline,
            begins,
            ends: Some(switch),
        });
        begins = switch;
    }
    out.push(Stretch {
        timeline: newest,
        begins,
        ends: None,
    });
    Ok(out)
}

/// The walk over what was listed: everything but `checked_at`, `system_identifier` and the
/// first-page checks, which [`check`] adds.
///
/// - `chain`: the newest timeline's stretches (None: its history file is missing, and nothing
///   before it can be followed);
/// - `bases`: where each kept base backup of the system starts (timeline, start LSN);
/// - `pending`: files the primary still has ready to archive: absent, but not a gap.
pub fn walk(
    holdings: &Holdings,
    chain: Option<&[Stretch]>,
    bases: &[(u32, Lsn)],
    segment_size: u64,
    pending: &BTreeSet<String>,
) -> ArchiveContinuity {
    let mut report = ArchiveContinuity::default();
    let Some(newest) = holdings.newest_timeline() else {
        return report;
    };
    let Some(chain) = chain else {
        report.missing_history.push(newest);
        return report;
    };
    report.missing_history = (chain.iter().map(|s| s.timeline))
        .filter(|t| *t > 1 && !holdings.histories.contains(t))
        .collect();
    // The oldest base backup on the newest history (one on an abandoned branch is not).
    let on_chain = |(timeline, start): &(u32, Lsn)| {
        chain.iter().position(|s| {
            s.timeline == *timeline && s.ends.is_none_or(|end| *start < end) && *start >= s.begins
        })
    };
    let Some((from, start)) = bases
        .iter()
        .filter_map(|b| on_chain(b).map(|i| (i, b.1)))
        .min_by_key(|(i, start)| (*i, *start))
    else {
        return report;
    };
    let per_xlogid = 0x1_0000_0000 / segment_size;
    let name = |timeline: u32, segno: u64| {
        format!(
            "{timeline:08X}{:08X}{:08X}",
            segno / per_xlogid,
            segno % per_xlogid
        )
    };
    for (i, stretch) in chain.iter().enumerate().skip(from) {
        let stored = holdings.segments.get(&stretch.timeline);
        let low = if i == from { start } else { stretch.begins };
        let first = low.0 / segment_size;
        let last = match stretch.ends {
            // The segment holding the switch point is read from the next timeline.
            Some(end) => (end.0 / segment_size).checked_sub(1),
            None => stored
                .and_then(|s| s.iter().next_back())
                .and_then(|n| segno(n, segment_size)),
        };
        let Some(last) = last.filter(|last| *last >= first) else {
            continue;
        };
        report.timelines.push(stretch.timeline);
        report
            .first_segment
            .get_or_insert_with(|| name(stretch.timeline, first));
        report.last_segment = Some(name(stretch.timeline, last));
        for segment in first..=last {
            let file = name(stretch.timeline, segment);
            if stored.is_some_and(|s| s.contains(&file)) {
                report.segments += 1;
            } else if pending.contains(&file) {
                report.pending += 1;
            } else if holdings.gaps.iter().any(|(a, b)| *a <= file && file <= *b) {
                report.released_count += 1;
            } else {
                report.missing_count += 1;
                if report.missing.len() < NAMED {
                    report.missing.push(file);
                }
            }
        }
    }
    report
}

/// The absolute segment number of a segment's name.
fn segno(name: &str, segment_size: u64) -> Option<u64> {
    Lsn::of_segment(name, segment_size).map(|lsn| lsn.0 / segment_size)
}

/// Lists the archive of `system`, reads its newest history file and each kept base backup of
/// the system, walks the span, and reads the first page of the first and last segment of each
/// timeline walked: its system identifier, segment size and address must be this archive's.
/// `from` (a base backup's timeline and start) walks from there instead of the oldest.
pub async fn check(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system: u64,
    pending: &BTreeSet<String>,
    checked_at: i64,
    from: Option<(u32, Lsn)>,
) -> Result<ArchiveContinuity, WalError> {
    let archive = WalArchive::new(location, system);
    let catalog = catalog::load(store, location).await?;
    let ours: Vec<_> = (catalog.backups.iter())
        .filter_map(|b| b.manifest.physical.as_ref())
        .filter(|p| p.system_identifier == system.to_string())
        .collect();
    let segment_size = (ours.iter().rev())
        .find_map(|p| p.wal_segment_size)
        .unwrap_or(DEFAULT_SEGMENT_SIZE);
    let bases: Vec<(u32, Lsn)> = match from {
        Some(from) => vec![from],
        None => (ours.iter())
            .filter_map(|p| Some((p.timeline, Lsn::parse(&p.start_lsn).ok()?)))
            .collect(),
    };
    let prefix = archive.prefix().to_owned();
    // A page at a time: an archive past the stores' 100,000-object cap is still checked.
    let mut holdings = Holdings::default();
    let mut pages = store::Pager::new(store, &prefix, &[]);
    while let Some(page) = pages.next().await? {
        holdings.add(&prefix, page.iter().map(|o| o.key.as_str()));
    }
    let chain = match holdings.newest_timeline() {
        Some(1) | None => Some(stretches(1, "").unwrap_or_default()),
        Some(newest) => {
            let file = WalName::parse(&format!("{newest:08X}.history"))?;
            match crate::wal::fetch(store, &archive, &file).await? {
                None => None,
                Some(bytes) => Some(stretches(newest, &String::from_utf8_lossy(&bytes)).map_err(
                    |reason| WalError::Damaged {
                        name: file.as_str().to_owned(),
                        reason,
                    },
                )?),
            }
        }
    };
    let mut report = walk(&holdings, chain.as_deref(), &bases, segment_size, pending);
    report.checked_at = checked_at;
    report.base_backups = bases.len() as u64;
    report.system_identifier = system.to_string();
    for timeline in report.timelines.clone() {
        let stored = holdings.segments.get(&timeline).into_iter().flatten();
        let within = |n: &&String| {
            report.first_segment.as_ref().is_none_or(|f| *n >= f)
                && report.last_segment.as_ref().is_none_or(|l| *n <= l)
        };
        let stored: Vec<&String> = stored.filter(within).collect();
        let ends = [stored.first(), stored.last()];
        let sampled: BTreeSet<&String> = ends.into_iter().flatten().copied().collect();
        for name in sampled {
            let expected = Lsn::of_segment(name, segment_size).unwrap_or(Lsn(0));
            if let Some(why) =
                first_page(store, &archive, name, system, segment_size, expected).await?
            {
                report.foreign.push(format!("{name}: {why}"));
            }
        }
    }
    Ok(report)
}

/// Reads the long header of `name`'s first page (decompressing only its start) and says what in
/// it is not this archive's: the system identifier, the segment size, or the page's address.
async fn first_page(
    store: &dyn ObjectStore,
    archive: &WalArchive,
    name: &str,
    system: u64,
    segment_size: u64,
    expected: Lsn,
) -> Result<Option<String>, WalError> {
    let file = WalName::parse(name)?;
    let packed = match store::get_bytes(store, &archive.key(&file)).await {
        Ok(packed) => packed,
        Err(e) if e.is_not_found() => return Ok(None), // deleted by retention meanwhile
        Err(e) => return Err(e.into()),
    };
    let mut header = [0u8; LONG_HEADER];
    let read = ZstdDecoder::new(&packed[..]).read_exact(&mut header).await;
    if let Err(e) = read {
        return Ok(Some(format!("its first page cannot be read ({e})")));
    }
    Ok(header_mismatch(&header, system, segment_size, expected))
}

/// `XLogLongPageHeaderData`: the short header (magic, info, timeline, page address, remaining
/// length; 24 bytes aligned), then system identifier, segment size and block size.
const LONG_HEADER: usize = 40;
const XLP_LONG_HEADER: u16 = 0x0002;

/// What in a segment's first page header is not this archive's (little-endian, as the servers
/// Tusk runs write it).
pub fn header_mismatch(
    header: &[u8; LONG_HEADER],
    system: u64,
    segment_size: u64,
    expected: Lsn,
) -> Option<String> {
    let u16_at = |i: usize| u16::from_le_bytes([header[i], header[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().unwrap_or_default());
    let u64_at = |i: usize| u64::from_le_bytes(header[i..i + 8].try_into().unwrap_or_default());
    if u16_at(2) & XLP_LONG_HEADER == 0 {
        return Some("its first page has no long header: not the start of a segment".into());
    }
    let (page, sysid, size) = (u64_at(8), u64_at(24), u64::from(u32_at(32)));
    if sysid != system {
        return Some(format!("it belongs to database system {sysid}"));
    }
    if size != segment_size {
        return Some(format!(
            "its segments are {size} bytes, this system's {segment_size}"
        ));
    }
    if page != expected.0 {
        return Some(format!("it holds the WAL at {}, not {expected}", Lsn(page)));
    }
    None
}

#[cfg(test)]
#[path = "continuity_tests.rs"]
mod tests;
