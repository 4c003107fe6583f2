//! Before a point-in-time restore starts: can its target be reached? The operator reads the
//! source's base backups and the end of its archive while the new cluster has no pod yet
//! (docs/src/design/pitr.md §5), and refuses, with the reason, a target no base backup reaches or
//! the archive does not hold — rather than a pod that recovers to the end of the archive and
//! never promotes (Zalando #1435: a target past the last archived commit).
//!
//! What is judged: a time needs a base backup completed by then, and a commit after it in the
//! WAL (read from the newest segments, [`commit_clock`]); an LSN needs a base backup consistent by then, and the segment holding it archived.
//! A transaction ID or a restore point name can only be checked by replaying: PostgreSQL does.
//! No target (the end of the archive) needs every segment from the base backup on: PostgreSQL
//! would end recovery at the first missing one and promote there, silently dropping all after
//! it, so the archive is walked first (the continuity check's walk) and a hole is refused, named.
//! Which base backup the restore starts from, and the refusals about it, are `restore_base`'s.

use std::collections::BTreeSet;

use backup_store::catalog;
use backup_store::continuity::{self, ArchiveContinuity};
use backup_store::layout::ClusterLocation;
use backup_store::live_history::LiveHistories;
use backup_store::lsn::Lsn;
use backup_store::store::{ObjectInfo, ObjectStore, Pager};
use k8s_openapi::jiff::Timestamp;

use super::commit_clock::{self, Clock};
use super::restore_base::refused;
pub use super::restore_base::{Base, Refusal, choose, same_major};
use crate::crd::RestoreTarget;
use crate::resources::{Cluster, RestorePlan};
use crate::runtime::Context;
use crate::runtime::buckets::{BucketError, cluster_location};

/// Whether the archive of `base`'s system (`wal`: its listing; `clock`: the newest commit
/// its WAL holds) reaches `target`.
pub fn reaches(
    target: &RestoreTarget,
    base: &Base,
    wal: &[ObjectInfo],
    clock: &Clock,
) -> Result<(), Refusal> {
    if let Some(refusal) = gap_refusal(target, base, wal) {
        return Err(refusal);
    }
    let not_yet = |what: String| Refusal {
        reason: "TargetNotArchived",
        message: format!(
            "{what}: commits after it were never archived, so recovery would end before the \
             target (the source's archiving is behind or stopped, or it wrote nothing since). \
             Choose an earlier target, leave target empty to restore the end of the archive \
             (all an idle source wrote), or wait while the source archives"
        ),
        retry: true,
    };
    if let Some(time) = target
        .time
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok())
    {
        match clock {
            // A recovery to a time stops at the first commit after it.
            Clock::Commit(newest) if newest.at > time => {}
            Clock::Commit(newest) => {
                return Err(not_yet(format!(
                    "{time} is not before the newest commit the archive of system {} holds, at \
                     {} (in {}); a recovery to a time stops only at a commit after it",
                    base.system, newest.at, newest.segment
                )));
            }
            // No commit read: by upload times (a store that lists none: PostgreSQL judges).
            Clock::Unknown => {
                let newest = commit_clock::segments(wal)
                    .filter_map(|(o, _)| o.last_modified)
                    .max();
                if let Some(newest) = newest
                    && newest < time
                {
                    return Err(not_yet(format!(
                        "{time} is after the newest WAL file of system {}, archived at {newest}",
                        base.system
                    )));
                }
            }
        }
    }
    if let (Some(lsn), Some(size)) = (
        target.lsn.as_deref().and_then(|l| Lsn::parse(l).ok()),
        base.segment_size,
    ) {
        let end = commit_clock::segments(wal)
            .filter_map(|(_, name)| Lsn::of_segment(name, size))
            .map(|start| start.0.saturating_add(size))
            .max();
        if end.is_none_or(|end| end <= lsn.0) {
            let upto = end.map_or("nothing".to_owned(), |e| Lsn(e).to_string());
            return Err(not_yet(format!(
                "LSN {lsn} is past the archive of system {}, which ends at {upto}",
                base.system
            )));
        }
    }
    Ok(())
}

/// A target past a gap in the archive (the disk policy released WAL unarchived, marker
/// `gaps/<first>-<last>.json`) that `base`, consistent before the gap ended, cannot cross: an
/// LSN from the gap's first segment on, or a time after the last file archived before it.
/// Final: no replay ever crosses it; a base backup taken after the gap reaches later targets.
fn gap_refusal(target: &RestoreTarget, base: &Base, wal: &[ObjectInfo]) -> Option<Refusal> {
    let (size, stop) = (base.segment_size?, base.stop?);
    let segment = |o: &ObjectInfo| {
        let name = o.key.rsplit('/').next()?;
        (!o.key.contains("/history/") && !o.key.contains("/gaps/"))
            .then(|| Lsn::of_segment(name, size))?
    };
    let gaps = wal
        .iter()
        .filter(|o| o.key.contains("/gaps/"))
        .filter_map(|o| {
            let name = o.key.rsplit('/').next()?.strip_suffix(".json")?;
            let (first, last) = name.split_once('-')?;
            let (first, last) = (Lsn::of_segment(first, size)?, Lsn::of_segment(last, size)?);
            (stop.0 < last.0.saturating_add(size)).then_some((first, name))
        });
    let (first, name) = gaps.min_by_key(|(first, _)| first.0)?;
    let refusal = |what: String| {
        refused(
            "TargetInArchiveGap",
            format!(
                "{what}: the archive of system {} has a gap from {first} ({name}: WAL released \
                 unarchived while the source's volume was full and its bucket failed), which \
                 base backup {} cannot cross. Choose an earlier target, or a base backup taken \
                 after the gap",
                base.system, base.id
            ),
        )
    };
    if let Some(lsn) = target.lsn.as_deref().and_then(|l| Lsn::parse(l).ok())
        && lsn.0 >= first.0
    {
        return Some(refusal(format!("LSN {lsn} is past the gap's start")));
    }
    let time = target.time.as_deref()?.parse::<Timestamp>().ok()?;
    let before = wal
        .iter()
        .filter_map(|o| Some((segment(o)?, o.last_modified?)))
        .filter(|(start, _)| start.0 < first.0)
        .max_by_key(|(start, _)| start.0);
    match before {
        Some((_, archived)) if time <= archived => None,
        Some((_, archived)) => Some(refusal(format!(
            "{time} is after {archived}, when the last WAL file before the gap was archived"
        ))),
        None => None,
    }
}

/// Whether the archive walked from `base` to its newest segment (`walk`) is whole, as a restore
/// to the end of the archive needs. A missing segment or history file is refused, named, and
/// retried (the source may still be uploading it, or heal it from a new primary's `pg_wal`); WAL
/// the disk policy released unarchived never comes back.
pub fn end_refusal(walk: &ArchiveContinuity, base: &Base) -> Option<Refusal> {
    let system = &base.system;
    let before = |segment: &str| {
        let size = base
            .segment_size
            .unwrap_or(continuity::DEFAULT_SEGMENT_SIZE);
        Lsn::of_segment(segment, size).map_or(String::new(), |lsn| {
            format!(", or set target.lsn before {lsn} to restore what comes before it")
        })
    };
    if let Some(first) = walk.missing.first() {
        let count = walk.missing_count;
        return Some(Refusal {
            reason: "ArchiveHole",
            message: format!(
                "the archive of system {system} misses {count} WAL segment(s) after base backup \
                 {}, the first {first}: a restore to the end of the archive would stop there and \
                 promote, dropping everything after it. Wait if the source is still archiving \
                 it{}",
                base.id,
                before(first)
            ),
            retry: true,
        });
    }
    if let Some(timeline) = walk.missing_history.first() {
        return Some(Refusal {
            reason: "ArchiveHole",
            message: format!(
                "the archive of system {system} misses the history file of timeline {timeline}: \
                 a restore to the end of the archive cannot follow it. Wait if the source is \
                 still archiving it"
            ),
            retry: true,
        });
    }
    (walk.released_count > 0).then(|| {
        refused(
            "TargetInArchiveGap",
            format!(
                "the archive of system {system} has {} WAL segment(s) after base backup {} \
                 released unarchived (the disk policy: the source's volume was full and its \
                 bucket failed): a restore to the end of the archive cannot cross them. Choose \
                 a target before the gap, or a base backup taken after it",
                walk.released_count, base.id
            ),
        )
    })
}

/// Reads the source's base backups and, for the one the first pod will restore, its system's
/// archive: None when `target` can be reached.
pub async fn check(
    plan: &RestorePlan,
    target: &RestoreTarget,
    cluster: &Cluster<'_>,
    ctx: &Context,
) -> Result<Option<Refusal>, BucketError> {
    if let Some(time) = &target.time
        && let Err(e) = time.parse::<Timestamp>()
    {
        // The schema admits the shape; a date that does not exist is caught here, final.
        let message = format!("spec.restore.target.time {time:?} is not a valid time: {e}");
        return Ok(Some(refused("InvalidSpec", message)));
    }
    let (namespace, name) = (&plan.layout.namespace, &plan.layout.cluster);
    let location = cluster_location(&plan.destination, namespace, name)?;
    let store = ctx
        .buckets
        .open(cluster.namespace, &plan.destination)
        .await?;
    let source = format!("{namespace}/{name}");
    let major = Some(cluster.spec.version.major());
    admit(
        store.as_ref(),
        &location,
        target,
        &plan.backup_id,
        &source,
        major,
    )
    .await
}

/// [`check`] on a store already open: the source's catalog, the base backup chosen for
/// `target`, and what its system's archive holds from that base backup on (the end of the
/// archive walked for `target: {}`). Its cost follows the WAL since that base backup, whatever
/// the archive's age.
pub async fn admit(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    target: &RestoreTarget,
    backup_id: &str,
    source: &str,
    major: Option<u32>,
) -> Result<Option<Refusal>, BucketError> {
    let catalog = catalog::load(store, location).await?;
    let systems = (catalog.backups.iter())
        .filter_map(|b| Some(b.manifest.physical.as_ref()?.system_identifier.clone()))
        .collect();
    let live = LiveHistories::load(store, location, systems)
        .await
        .map_err(BucketError::Wal)?;
    let bases: Vec<Base> = (catalog.backups.iter())
        .filter_map(|b| {
            let mut base = Base::of(&b.manifest)?;
            base.off_history = live.why_not(b.manifest.physical.as_ref()?);
            Some(base)
        })
        .collect();
    let base = match choose(target, backup_id, &bases, source) {
        Ok(base) => base,
        Err(refusal) => return Ok(Some(refusal)),
    };
    if let Some(Err(refusal)) = major.map(|major| same_major(base, major, source)) {
        return Ok(Some(refusal));
    }
    let Ok(system) = base.system.parse::<u64>() else {
        return Ok(None); // not ours to judge: PostgreSQL will
    };
    if target.variable().is_none() {
        let Some(from) = base.start else {
            return Ok(None);
        };
        let now = Timestamp::now().as_second();
        let size = (base.segment_size).unwrap_or(continuity::DEFAULT_SEGMENT_SIZE);
        let none = BTreeSet::new();
        let walked = continuity::check_from(store, location, system, &none, now, from, size)
            .await
            .map_err(BucketError::Wal)?;
        return Ok(end_refusal(&walked, base));
    }
    let wal = since_base(store, &location.wal_prefix(system), base).await?;
    let clock = match target.time {
        Some(_) => commit_clock::read(store, location, system, &wal).await?,
        None => Clock::Unknown,
    };
    Ok(reaches(target, base, &wal, &clock).err())
}

/// What [`reaches`] reads of a system's archive (at `prefix`): its gap markers and history
/// files, and the segments from `base`'s start on, each timeline's folder listed from there a
/// page at a time. Its cost follows the WAL since that base backup, not the archive's age (the
/// whole listing failed past the stores' 100,000-object cap, about day 6).
async fn since_base(
    store: &dyn ObjectStore,
    prefix: &str,
    base: &Base,
) -> Result<Vec<ObjectInfo>, BucketError> {
    let mut wal = Vec::new();
    for folder in ["gaps/", "history/"] {
        let mut pages = Pager::new(store, &format!("{prefix}{folder}"), &[]);
        while let Some(page) = pages.next().await? {
            wal.extend(page);
        }
    }
    let (timeline, start) = base.start.unwrap_or((1, Lsn(0)));
    let later = (wal.iter())
        .filter_map(|o| o.key.rsplit('/').next()?.strip_suffix(".history.zst"))
        .filter_map(|t| u32::from_str_radix(t, 16).ok())
        .filter(|t| *t > timeline);
    let folders: BTreeSet<u32> = later.chain([timeline]).collect();
    let size = base
        .segment_size
        .unwrap_or(continuity::DEFAULT_SEGMENT_SIZE);
    for t in folders {
        let folder = format!("{prefix}{t:08X}/");
        let mut pages = Pager::new(store, &folder, &[]);
        if t == timeline {
            // Just before the base backup's first segment: its name without the suffix.
            let segno = start.0 / size;
            let per_log = 0x1_0000_0000 / size;
            let first = format!("{t:08X}{:08X}{:08X}", segno / per_log, segno % per_log);
            pages = pages.after(&format!("{folder}{first}"));
        }
        while let Some(page) = pages.next().await? {
            wal.extend(page);
        }
    }
    Ok(wal)
}

#[cfg(test)]
#[path = "restore_window_tests.rs"]
mod tests;
