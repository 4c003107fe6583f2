//! The archiver's side of the disk policy ([`crate::disk_policy`]): the gap it opens when it
//! gives way, kept on the data volume beside PGDATA (`<PGDATA>.tusk-archive-gaps/`, so a
//! restarted manager still knows it) until the bucket answers and takes the marker
//! (`wal/<system>/gaps/<first>-<last>.json`). Nothing about a gap is silent: a Warning Event
//! when it opens, `/status` and the metrics while it lasts, the marker after.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use backup_store::wal::WalName;
use tusk_contract::status::ArchiveGap;

use crate::disk_policy::{self, DiskPolicy};
use crate::events::Events;

/// How full the data volume is (percent), or `None` when it cannot be read.
pub type VolumeProbe = Box<dyn Fn() -> Option<u8> + Send + Sync>;

/// The gaps' directory for `pgdata`.
pub fn gaps_dir(pgdata: &Path) -> PathBuf {
    let mut dir = pgdata.as_os_str().to_owned();
    dir.push(".tusk-archive-gaps");
    PathBuf::from(dir)
}

/// The marker's name in the bucket: its segment range, else when it opened.
pub fn marker_name(gap: &ArchiveGap) -> String {
    match (&gap.first_segment, &gap.last_segment) {
        (Some(first), Some(last)) => format!("{first}-{last}"),
        _ => format!("at-{}", gap.opened_at),
    }
}

pub struct DiskGuard {
    policy: DiskPolicy,
    volume: VolumeProbe,
    dir: PathBuf,
    state: Mutex<Gaps>,
    /// `ArchiveBacklogHigh` said during this outage.
    warned: AtomicBool,
}

#[derive(Default)]
struct Gaps {
    open: Option<ArchiveGap>,
    /// Closed, waiting for the bucket to take their markers.
    closed: Vec<ArchiveGap>,
    /// The last one closed, for `/status`.
    last: Option<ArchiveGap>,
}

impl DiskGuard {
    /// The guard of `pgdata`'s volume, with the gaps a previous manager left.
    pub fn new(pgdata: &Path, policy: DiskPolicy, volume: VolumeProbe) -> Self {
        let dir = gaps_dir(pgdata);
        let mut gaps = Gaps::default();
        for gap in load(&dir) {
            match gap.closed_at {
                None if gaps.open.is_none() => gaps.open = Some(gap),
                // Two open ones (a crash between records): the older ended when the newer began.
                _ => {
                    let mut gap = gap;
                    gap.closed_at.get_or_insert(gap.opened_at);
                    gaps.closed.push(gap);
                }
            }
        }
        Self {
            policy,
            volume,
            dir,
            state: Mutex::new(gaps),
            warned: AtomicBool::new(false),
        }
    }

    /// The volume's probe for `pgdata` itself.
    pub fn probe(pgdata: &Path) -> VolumeProbe {
        let pgdata = pgdata.to_owned();
        Box::new(move || disk_policy::used_percent(&pgdata).ok())
    }

    pub fn policy(&self) -> DiskPolicy {
        self.policy
    }

    pub fn used(&self) -> Option<u8> {
        (self.volume)()
    }

    /// Whether `file` gives way untried: a gap is open, the volume still nearly full, and the
    /// last failure too recent for another probe.
    pub fn gives_way_untried(&self, last_failure: Option<SystemTime>) -> bool {
        let open = self.state().open.is_some();
        let since = last_failure
            .and_then(|at| at.elapsed().ok())
            .unwrap_or(Duration::MAX);
        open && (self.used()).is_some_and(|u| self.policy.gives_way_untried(u, open, since))
    }

    /// After `file` failed with `error`, the bucket failing for `outage`: records it in the gap
    /// and returns true if the volume is full enough and the outage long enough to give way;
    /// else warns once from the policy's warning level.
    pub fn after_failure(
        &self,
        system: u64,
        file: &WalName,
        error: &str,
        outage: Duration,
        events: Option<&Events>,
    ) -> bool {
        let Some(used) = self.used() else {
            return false; // no fill known: keep the WAL, as without a policy
        };
        let mut state = self.state();
        if !self.policy.gives_way(used, state.open.is_some(), outage) {
            if used >= self.policy.warn_at() && !self.warned.swap(true, Ordering::Relaxed) {
                let note = format!(
                    "the data volume is {used} % full and archiving fails; at {} % WAL is \
                     released unarchived (a gap in the archive) so the database keeps running",
                    self.policy.gap_at
                );
                if let Some(events) = events {
                    events.warning("ArchiveBacklogHigh", "Archive", note);
                }
            }
            return false;
        }
        let opened = state.open.is_none();
        let gap = state.open.get_or_insert_with(|| ArchiveGap {
            system_identifier: system.to_string(),
            opened_at: unix_seconds(SystemTime::now()),
            volume_used_percent: used,
            reason: error.to_owned(),
            ..ArchiveGap::default()
        });
        extend(gap, file);
        let gap = gap.clone();
        drop(state);
        self.save(&gap);
        tracing::warn!(
            file = file.as_str(),
            used,
            "the archive gives way: WAL released unarchived"
        );
        if opened && let Some(events) = events {
            let note = format!(
                "the data volume is {used} % full (policy: {} %) and archiving fails ({error}): \
                 WAL from {} on is released unarchived so the database keeps running; no \
                 point-in-time restore can cross this gap, and a base backup follows when the \
                 bucket answers",
                self.policy.gap_at,
                file.as_str()
            );
            events.warning("ArchiveGap", "Archive", note);
        }
        true
    }

    /// After an upload succeeded: closes the open gap. Returns the closed gaps whose markers
    /// the bucket does not have yet.
    pub fn after_success(&self, events: Option<&Events>) -> Vec<ArchiveGap> {
        self.warned.store(false, Ordering::Relaxed);
        let mut state = self.state();
        if let Some(mut gap) = state.open.take() {
            gap.closed_at = Some(unix_seconds(SystemTime::now()));
            self.save(&gap);
            let note = format!(
                "archiving again; {} file(s) were released unarchived ({})",
                gap.files,
                marker_name(&gap)
            );
            if let Some(events) = events {
                events.normal("ArchiveGapClosed", "Archive", note);
            }
            state.last = Some(gap.clone());
            state.closed.push(gap);
        }
        state.closed.clone()
    }

    /// The bucket holds `gap`'s marker: the local copy goes.
    pub fn uploaded(&self, gap: &ArchiveGap) {
        self.state().closed.retain(|g| g != gap);
        let _ = std::fs::remove_file(self.dir.join(local_name(gap)));
    }

    /// The open gap, else the last closed one.
    pub fn current(&self) -> Option<ArchiveGap> {
        let state = self.state();
        state.open.clone().or_else(|| state.last.clone())
    }

    /// Written through a rename, so a crash leaves the old record or the new one. A volume
    /// too full for it keeps the gap in memory: giving way must not depend on this write.
    fn save(&self, gap: &ArchiveGap) {
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.dir)?;
            let path = self.dir.join(local_name(gap));
            let temp = path.with_extension("tmp");
            std::fs::write(&temp, serde_json::to_vec(gap).unwrap_or_default())?;
            std::fs::rename(&temp, &path)
        };
        if let Err(e) = write() {
            tracing::warn!(error = %e, dir = %self.dir.display(), "could not record the archive gap on the volume");
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Gaps> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn extend(gap: &mut ArchiveGap, file: &WalName) {
    let name = file.as_str();
    if name.len() == 24 {
        gap.first_segment.get_or_insert_with(|| name.to_owned());
        gap.last_segment = Some(name.to_owned());
    } else if !gap.other_files.iter().any(|f| f == name) {
        gap.other_files.push(name.to_owned());
    }
    gap.files += 1;
}

/// The local record's name: stable while the gap grows.
fn local_name(gap: &ArchiveGap) -> String {
    format!("{}.json", gap.opened_at)
}

fn load(dir: &Path) -> Vec<ArchiveGap> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut gaps: Vec<ArchiveGap> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "json").then_some(())?;
            serde_json::from_slice(&std::fs::read(path).ok()?).ok()
        })
        .collect();
    gaps.sort_by_key(|g| std::cmp::Reverse(g.opened_at));
    gaps
}

fn unix_seconds(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
