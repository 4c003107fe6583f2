//! The archive continuity check (issue 28, docs/src/design/pitr.md §6): does the archive of one
//! database system hold every file a restore from its oldest base backup to its newest archived
//! segment needs? It follows the newest timeline's history back through each switch, and names
//! what is missing: segments (those a gap marker explains apart), history files, and files whose
//! first page belongs to another system.
//!
//! The walk itself ([`walk`]) is a pure function of what was listed; [`check`] lists and reads.

use std::collections::BTreeSet;

pub use tusk_contract::status::ArchiveContinuity;

use crate::catalog;
use crate::layout::ClusterLocation;
use crate::lsn::Lsn;
use crate::store::ObjectStore;
use crate::wal::{WalArchive, WalError, WalName};

mod first_page;
mod holdings;

pub use first_page::header_mismatch;
pub use holdings::Holdings;

/// How many missing segments a report names (the count says how many there are).
pub const NAMED: usize = 20;
/// PostgreSQL's default `wal_segment_size`, for a system whose base backups do not record one.
pub const DEFAULT_SEGMENT_SIZE: u64 = 16 << 20;

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
    pending: &BTreeSet<String>,
) -> ArchiveContinuity {
    let mut report = ArchiveContinuity::default();
    for span in spans(holdings, chain, bases, &mut report) {
        let stored = holdings.segments.get(&span.timeline);
        report.timelines.push(span.timeline);
        (report.first_segment).get_or_insert_with(|| holdings.name(span.timeline, span.first));
        report.last_segment = Some(holdings.name(span.timeline, span.last));
        report.segments += stored.map_or(0, |s| s.count_within(span.first, span.last));
        // Only what is not stored is looked at one by one: holes are few, segments many.
        let holes = match stored {
            Some(stored) => stored.holes(span.first, span.last),
            None => vec![(span.first, span.last)],
        };
        for segment in holes.into_iter().flat_map(|(a, b)| a..=b) {
            let file = holdings.name(span.timeline, segment);
            if pending.contains(&file) {
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

/// The segments one timeline contributes to the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    timeline: u32,
    first: u64,
    last: u64,
}

/// The spans the walk covers: from the oldest base backup on the newest history to the newest
/// segment stored, timeline by timeline; what cannot be followed goes into `report`.
fn spans(
    holdings: &Holdings,
    chain: Option<&[Stretch]>,
    bases: &[(u32, Lsn)],
    report: &mut ArchiveContinuity,
) -> Vec<Span> {
    let Some(newest) = holdings.newest_timeline() else {
        return Vec::new();
    };
    let Some(chain) = chain else {
        report.missing_history.push(newest);
        return Vec::new();
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
        return Vec::new();
    };
    let size = holdings.segment_size;
    let mut out = Vec::new();
    for (i, stretch) in chain.iter().enumerate().skip(from) {
        let low = if i == from { start } else { stretch.begins };
        let first = low.0 / size;
        let last = match stretch.ends {
            // The segment holding the switch point is read from the next timeline.
            Some(end) => (end.0 / size).checked_sub(1),
            None => holdings
                .segments
                .get(&stretch.timeline)
                .and_then(|s| s.last()),
        };
        if let Some(last) = last.filter(|last| *last >= first) {
            out.push(Span {
                timeline: stretch.timeline,
                first,
                last,
            });
        }
    }
    out
}

/// How long a check that keeps its holdings goes without listing the whole archive again: a
/// file deleted by hand, below where the listings go on, is seen within this.
pub const RELIST_EVERY_SECONDS: i64 = 24 * 3600;

/// What [`check_since`] keeps between checks.
#[derive(Debug, Clone)]
pub struct Known {
    system: u64,
    holdings: Holdings,
    listed_whole_at: i64,
    missing: bool,
}

/// [`check`] for the primary's periodic checks: it keeps what it listed in `known` and the
/// next time lists each timeline's folder only past it (from the first segment still pending,
/// so one archived late is seen), history files and gap markers in full. A check at steady
/// state then costs what arrived since the last one, not the archive's age. The whole archive
/// is listed again every [`RELIST_EVERY_SECONDS`], after a check that found a segment missing
/// (until the hole is filled or explained), and for another system or segment size.
pub async fn check_since(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system: u64,
    pending: &BTreeSet<String>,
    checked_at: i64,
    known: &mut Option<Known>,
) -> Result<(ArchiveContinuity, usize), WalError> {
    let (bases, size) = bases_of(store, location, system).await?;
    let kept = known.take().filter(|k| {
        k.system == system
            && k.holdings.segment_size == size
            && !k.missing
            && checked_at - k.listed_whole_at < RELIST_EVERY_SECONDS
    });
    let (holdings, listed_whole_at) = match kept {
        Some(k) => (k.holdings, k.listed_whole_at),
        None => (Holdings::new(size), checked_at),
    };
    let (report, holdings, requests) = check_holdings(
        store, location, system, pending, checked_at, &bases, holdings,
    )
    .await?;
    *known = Some(Known {
        system,
        holdings,
        listed_whole_at,
        missing: report.missing_count > 0 || !report.missing_history.is_empty(),
    });
    Ok((report, requests))
}

/// Lists the archive of `system`, reads its newest history file and each kept base backup of
/// the system, walks the span, and reads the first page of the first and last segment of each
/// timeline walked: its system identifier, segment size and address must be this archive's.
/// `from` (a base backup's timeline and start) walks, and lists, from there instead of the oldest.
pub async fn check(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system: u64,
    pending: &BTreeSet<String>,
    checked_at: i64,
    from: Option<(u32, Lsn)>,
) -> Result<ArchiveContinuity, WalError> {
    let (bases, size) = bases_of(store, location, system).await?;
    match from {
        Some(from) => check_from(store, location, system, pending, checked_at, from, size).await,
        None => {
            let holdings = Holdings::new(size);
            let checked = check_holdings(
                store, location, system, pending, checked_at, &bases, holdings,
            );
            Ok(checked.await?.0)
        }
    }
}

/// [`check`] from a base backup (its timeline and start) whose segment size the caller knows
/// (restore admission has read the catalog already): listed from that backup's first segment,
/// earlier timelines and WAL not walked, so its cost follows the WAL since that backup.
pub async fn check_from(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system: u64,
    pending: &BTreeSet<String>,
    checked_at: i64,
    (timeline, start): (u32, Lsn),
    segment_size: u64,
) -> Result<ArchiveContinuity, WalError> {
    let mut holdings = Holdings::new(segment_size);
    let prefix = WalArchive::new(location, system).prefix().to_owned();
    holdings.relist_from(&prefix, timeline, start.0 / segment_size);
    let bases = [(timeline, start)];
    let checked = check_holdings(
        store, location, system, pending, checked_at, &bases, holdings,
    );
    Ok(checked.await?.0)
}

/// The base backups of `system` the bucket keeps (where each starts), and its segment size
/// (from the newest that records one).
async fn bases_of(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system: u64,
) -> Result<(Vec<(u32, Lsn)>, u64), WalError> {
    let catalog = catalog::load(store, location).await?;
    let ours: Vec<_> = (catalog.backups.iter())
        .filter_map(|b| b.manifest.physical.as_ref())
        .filter(|p| p.system_identifier == system.to_string())
        .collect();
    let size = (ours.iter().rev())
        .find_map(|p| p.wal_segment_size)
        .unwrap_or(DEFAULT_SEGMENT_SIZE);
    let starts = (ours.iter())
        .filter_map(|p| Some((p.timeline, Lsn::parse(&p.start_lsn).ok()?)))
        .collect();
    Ok((starts, size))
}

/// [`check`] on `holdings` (empty, or what an earlier check listed): returns the report, the
/// holdings for a next check and the list requests made.
async fn check_holdings(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system: u64,
    pending: &BTreeSet<String>,
    checked_at: i64,
    bases: &[(u32, Lsn)],
    mut holdings: Holdings,
) -> Result<(ArchiveContinuity, Holdings, usize), WalError> {
    let archive = WalArchive::new(location, system);
    let prefix = archive.prefix().to_owned();
    // A page at a time, and from where the last listing stopped: an archive past the stores'
    // 100,000-object cap is still checked, and a kept check lists what arrived since.
    let requests = holdings.list(store, &prefix).await?;
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
    let mut report = walk(&holdings, chain.as_deref(), bases, pending);
    report.checked_at = checked_at;
    report.base_backups = bases.len() as u64;
    report.system_identifier = system.to_string();
    let mut report_spans = ArchiveContinuity::default();
    for span in spans(&holdings, chain.as_deref(), bases, &mut report_spans) {
        // A file pending now may land where the next listing of its folder has passed.
        let waiting = (pending.iter())
            .filter(|n| n.starts_with(&format!("{:08X}", span.timeline)))
            .filter_map(|n| holdings.number(n))
            .filter(|n| (span.first..=span.last).contains(n));
        if let Some(first) = waiting.min() {
            holdings.relist_from(&prefix, span.timeline, first);
        }
        let Some(stored) = holdings.segments.get(&span.timeline) else {
            continue;
        };
        let ends = [stored.first_from(span.first), stored.last_until(span.last)];
        let sampled: BTreeSet<u64> = ends.into_iter().flatten().collect();
        for n in sampled {
            let name = holdings.name(span.timeline, n);
            let expected = Lsn(n * holdings.segment_size);
            let size = holdings.segment_size;
            if let Some(why) =
                first_page::first_page(store, &archive, &name, system, size, expected).await?
            {
                report.foreign.push(format!("{name}: {why}"));
            }
        }
    }
    Ok((report, holdings, requests))
}

#[cfg(test)]
mod since_tests;
#[cfg(test)]
mod tests;
