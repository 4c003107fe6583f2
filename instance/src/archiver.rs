//! The WAL archiver (issue 27, docs/src/design/pitr.md §1). PostgreSQL's `archive_command` is
//! `tusk-instance wal-push %p` ([`crate::wal_push`]): a thin client that hands the path to
//! this server over a Unix socket and exits 0 only once the server answers that the file is
//! durable in the bucket. The server owns what a process per segment would set up each time:
//! the store client, its connections and its credentials, which no PostgreSQL process holds.
//! While PostgreSQL waits for one file, the next `.ready` ones are already being uploaded
//! ([`IN_FLIGHT`] at most), so a backlog drains in parallel although the archiver is serial.
//! The socket and its protocol: [`crate::archive_socket`].

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use backup_store::ClusterLocation;
use backup_store::continuity;
use backup_store::settings::StoreFlags;
use backup_store::store::{Bounded, ObjectStore};
use backup_store::wal::{self, Pushed, WalArchive, WalName};
use futures::future::{BoxFuture, FutureExt, Shared};
use tusk_contract::status::{ArchiveContinuity, ArchiveStatus};

use crate::archive_gap::{DiskGuard, VolumeProbe, marker_name};
use crate::disk_policy::DiskPolicy;
use crate::events::Events;

/// Uploads at once, the one PostgreSQL waits for included. Each holds one compressed segment
/// (at most 16 MiB with the default segment size, a few MiB for usual WAL).
pub const IN_FLIGHT: usize = 4;
/// The longest any one call to the bucket may take (one segment's upload included).
const STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// One upload, awaited by the request for its file and perhaps started before it.
type Upload = Shared<BoxFuture<'static, Result<Pushed, Failure>>>;

/// An upload that failed: why, and what kind of failure it is, since only an outage of the
/// bucket may give way (`disk_policy`).
#[derive(Debug, Clone)]
struct Failure {
    message: String,
    /// The bucket's error (unreachable, refused, timed out), not the file's or this pod's.
    outage: bool,
    /// Other bytes already stored under the name: two writers of one timeline.
    conflict: bool,
}

impl Failure {
    fn outage(message: String) -> Self {
        Self {
            message,
            outage: true,
            conflict: false,
        }
    }

    fn local(message: String) -> Self {
        Self {
            message,
            outage: false,
            conflict: false,
        }
    }

    fn of(error: &wal::WalError) -> Self {
        Self {
            message: error.to_string(),
            outage: matches!(error, wal::WalError::Store(_)),
            conflict: matches!(error, wal::WalError::Conflict { .. }),
        }
    }
}

/// What became of a file PostgreSQL asked to archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archived {
    Stored,
    /// The same bytes were already there (a retry after a crash).
    AlreadyArchived,
    /// Released unarchived by the disk policy: the volume was full and the bucket failing.
    GaveWay,
    /// On a standby: the bucket holds it, the primary's upload ([`standby`]).
    ByPrimary,
    /// No one archives it under its name (an abandoned timeline's end, a gap the primary
    /// recorded), or this server restores a backup and the file is the source's.
    NotArchivable,
    /// On a standby whose volume reached the disk policy's threshold, before the primary
    /// archived it: the primary keeps its own copy.
    Released,
}

impl From<Pushed> for Archived {
    fn from(pushed: Pushed) -> Self {
        match pushed {
            Pushed::Stored => Self::Stored,
            Pushed::AlreadyArchived => Self::AlreadyArchived,
        }
    }
}

/// What the archiver did, for `/status` and the metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArchiveStats {
    pub archived: u64,
    pub failed: u64,
    pub gave_way: u64,
    pub last_archived: Option<(String, SystemTime)>,
    /// The file, when, and the error (never a credential: store errors name the operation).
    pub last_failure: Option<(String, SystemTime, String)>,
    /// When the failures since the last success began.
    pub failing_since: Option<SystemTime>,
    /// The file the bucket holds other bytes for, until a success.
    pub conflict: Option<String>,
}

impl ArchiveStats {
    /// Whether the last attempt failed.
    pub fn failing(&self) -> bool {
        match (&self.last_failure, &self.last_archived) {
            (Some((_, failed, _)), Some((_, archived))) => failed > archived,
            (failure, _) => failure.is_some(),
        }
    }
}

struct Opened {
    store: Box<dyn ObjectStore>,
    location: ClusterLocation,
}

pub struct Archiver {
    pgdata: PathBuf,
    /// The bucket and the cluster's place in it (`None`: given open, in tests).
    opener: Option<(StoreFlags, String, String)>,
    /// Opened on the first request, and again after a failure to open.
    opened: tokio::sync::OnceCell<Opened>,
    uploads: Mutex<HashMap<String, Upload>>,
    stats: Mutex<ArchiveStats>,
    /// A Warning when archiving starts failing, a Normal when it works again (not one per try).
    events: Option<Events>,
    /// Uploads at once ([`IN_FLIGHT`]; `TUSK_ARCHIVE_PARALLEL` for benchmarks).
    in_flight: usize,
    /// The disk policy and its gaps.
    guard: DiskGuard,
    continuity: crate::continuity_checks::Checks,
}

impl Archiver {
    pub fn new(
        pgdata: PathBuf,
        flags: StoreFlags,
        namespace: String,
        cluster: String,
        policy: DiskPolicy,
    ) -> Self {
        Self {
            guard: DiskGuard::new(&pgdata, policy, DiskGuard::probe(&pgdata)),
            pgdata,
            opener: Some((flags, namespace, cluster)),
            opened: tokio::sync::OnceCell::new(),
            uploads: Mutex::new(HashMap::new()),
            stats: Mutex::new(ArchiveStats::default()),
            events: None,
            in_flight: IN_FLIGHT,
            continuity: crate::continuity_checks::Checks::default(),
        }
    }

    /// An archiver writing into a store already open, on a volume `volume` measures.
    pub fn with_store(
        pgdata: PathBuf,
        store: Box<dyn ObjectStore>,
        location: ClusterLocation,
        policy: DiskPolicy,
        volume: VolumeProbe,
    ) -> Self {
        Self {
            guard: DiskGuard::new(&pgdata, policy, volume),
            pgdata,
            opener: None,
            opened: tokio::sync::OnceCell::new_with(Some(Opened { store, location })),
            uploads: Mutex::new(HashMap::new()),
            stats: Mutex::new(ArchiveStats::default()),
            events: None,
            in_flight: IN_FLIGHT,
            continuity: crate::continuity_checks::Checks::default(),
        }
    }

    /// As the manager runs it: an Event when archiving starts failing and when it works
    /// again, `in_flight` uploads at once.
    pub fn serving(mut self, events: Events, in_flight: usize) -> Self {
        self.events = Some(events);
        self.in_flight = in_flight.max(1);
        self
    }

    pub fn stats(&self) -> ArchiveStats {
        lock(&self.stats).clone()
    }

    /// The record `/status` reports.
    pub fn status(&self) -> ArchiveStatus {
        let stats = self.stats();
        let failing = stats.failing();
        let seconds = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        };
        let (last_archived_wal, last_archived_at) = stats
            .last_archived
            .map_or((None, None), |(wal, at)| (Some(wal), Some(seconds(at))));
        let (last_failed_wal, last_failed_at, last_error) = stats
            .last_failure
            .map_or((None, None, None), |(wal, at, error)| {
                (Some(wal), Some(seconds(at)), Some(error))
            });
        ArchiveStatus {
            archived_count: stats.archived,
            failed_count: stats.failed,
            failing,
            pending: self.ready().len() as u64,
            last_archived_wal,
            last_archived_at,
            last_failed_wal,
            last_failed_at,
            last_error,
            conflict: stats.conflict,
            gave_way_count: stats.gave_way,
            volume_used_percent: self.guard.used(),
            gap_at_percent: Some(self.guard.policy().gap_at),
            gap: self.guard.current(),
            continuity: self.continuity.last(),
        }
    }

    /// Archives the file at `path` (PostgreSQL's `%p`, made absolute by the hook); on a
    /// standby, answers once the primary has ([`standby`]).
    pub async fn archive(self: &Arc<Self>, path: &str) -> Result<Archived, String> {
        let (name, path) = self.wal_file(path)?;
        match standby::recovering(&self.pgdata) {
            Some(standby::Recovery::Restore) => return Ok(Archived::NotArchivable),
            // Nothing counted: a standby uploads nothing, and waiting is no failure.
            Some(standby::Recovery::Standby) => return self.hold(&name, &path).await,
            None => {}
        }
        let last_failure = lock(&self.stats).last_failure.as_ref().map(|f| f.1);
        if self.guard.gives_way_untried(last_failure) {
            return self.give_way(&name, "the bucket failed moments ago", Duration::ZERO);
        }
        let upload = self.upload(&name, path);
        self.read_ahead(&name);
        let result = upload.await;
        lock(&self.uploads).remove(name.as_str());
        if result.is_ok() {
            let closed = self.guard.after_success(self.events.as_ref());
            self.upload_markers(closed).await;
        }
        let mut stats = lock(&self.stats);
        let was_failing = stats.failing();
        match &result {
            Ok(_) => {
                if was_failing && let Some(events) = &self.events {
                    let note = format!("archived {} again", name.as_str());
                    events.normal("ArchiveRecovered", "Archive", note);
                }
                stats.archived += 1;
                stats.failing_since = None;
                stats.conflict = None;
                stats.last_archived = Some((name.as_str().to_owned(), SystemTime::now()));
                // A backup history file: a base backup just ended; check the archive after it.
                if name.as_str().ends_with(".backup") {
                    self.continuity.soon();
                }
            }
            Err(failure) => {
                let e = &failure.message;
                tracing::warn!(file = name.as_str(), error = %e, "archiving WAL failed");
                // A conflict is its own state, said once per file even amid an outage.
                let new_conflict =
                    failure.conflict && stats.conflict.as_deref() != Some(name.as_str());
                if let Some(events) = &self.events {
                    if new_conflict {
                        let note = format!(
                            "{e}: two servers wrote timeline {} (a split brain); the file is \
                             kept, never overwritten and never released unarchived",
                            &name.as_str()[..8.min(name.as_str().len())]
                        );
                        events.warning("ArchiveConflict", "Archive", note);
                    } else if !was_failing && !failure.conflict {
                        let note = format!("archiving {} failed: {e}", name.as_str());
                        events.warning("ArchiveFailing", "Archive", note);
                    }
                }
                if failure.conflict {
                    stats.conflict = Some(name.as_str().to_owned());
                }
                stats.failed += 1;
                let since = *stats.failing_since.get_or_insert_with(SystemTime::now);
                let recorded = (name.as_str().to_owned(), SystemTime::now(), e.clone());
                stats.last_failure = Some(recorded);
                drop(stats);
                if !failure.outage {
                    return Err(e.clone());
                }
                let outage = since.elapsed().unwrap_or_default();
                return self.give_way(&name, e, outage).or(Err(e.clone()));
            }
        }
        result.map(Archived::from).map_err(|f| f.message)
    }

    /// The disk policy's answer for a file the bucket did not take: `Ok(GaveWay)` when the
    /// volume is full enough, else the error, and PostgreSQL keeps the file and retries.
    fn give_way(&self, name: &WalName, error: &str, outage: Duration) -> Result<Archived, String> {
        let system = wal::system_identifier(&self.pgdata).map_err(|e| e.to_string())?;
        if !(self.guard).after_failure(system, name, error, outage, self.events.as_ref()) {
            return Err(error.to_owned());
        }
        lock(&self.stats).gave_way += 1;
        Ok(Archived::GaveWay)
    }

    /// Hands the bucket the markers of closed gaps (create-only: one already there counts);
    /// one that fails stays on the volume and goes with the next success.
    async fn upload_markers(&self, closed: Vec<tusk_contract::status::ArchiveGap>) {
        let Some(opened) = self.opened.get() else {
            return;
        };
        for gap in closed {
            let Ok(system) = gap.system_identifier.parse::<u64>() else {
                self.guard.uploaded(&gap);
                continue;
            };
            let archive = WalArchive::new(&opened.location, system);
            let key = archive.gap_key(&marker_name(&gap));
            let body = serde_json::to_vec(&gap).unwrap_or_default();
            match opened.store.put_if_absent(&key, body.into()).await {
                Err(e) if !e.is_already_exists() => {
                    tracing::warn!(%key, error = %e, "recording the archive gap in the bucket failed");
                }
                _ => self.guard.uploaded(&gap),
            }
        }
    }

    /// Only a file of this server's `pg_wal`, by a name PostgreSQL archives: the socket must
    /// not become a way to upload any file the postgres user can read.
    fn wal_file(&self, requested: &str) -> Result<(WalName, PathBuf), String> {
        let path = PathBuf::from(requested);
        let refused = |why: &str| format!("{requested}: {why}");
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| refused("names no file"))?;
        let name = WalName::parse(name).map_err(|e| e.to_string())?;
        let canonical = |p: &Path| std::fs::canonicalize(p).map_err(|e| refused(&e.to_string()));
        let parent = path.parent().ok_or_else(|| refused("names no file"))?;
        if canonical(parent)? != canonical(&self.pgdata.join("pg_wal"))? {
            return Err(refused("not in this server's pg_wal"));
        }
        Ok((name, path))
    }

    /// The upload of `name`: the one already started, or a new one.
    fn upload(self: &Arc<Self>, name: &WalName, path: PathBuf) -> Upload {
        let mut uploads = lock(&self.uploads);
        // One started ahead that failed is tried again now, not answered with its failure.
        let failed = |u: &Upload| matches!(u.peek(), Some(Err(_)));
        if let Some(upload) = uploads.get(name.as_str()).filter(|u| !failed(u)) {
            return upload.clone();
        }
        let upload = self.start(name.clone(), path);
        uploads.insert(name.as_str().to_owned(), upload.clone());
        upload
    }

    fn start(self: &Arc<Self>, file: WalName, path: PathBuf) -> Upload {
        let this = self.clone();
        async move { this.push(&file, &path).await }
            .boxed()
            .shared()
    }

    /// Starts uploading the files PostgreSQL will ask for next (`.ready`, oldest first) while
    /// fewer than [`IN_FLIGHT`] are held. Uploads of files no longer ready (archived, or gone
    /// with a rewind) are forgotten, so a failed one never holds a place.
    fn read_ahead(self: &Arc<Self>, current: &WalName) {
        let mut ready = self.ready();
        ready.retain(|name| name != current.as_str());
        let mut started = Vec::new();
        {
            let mut uploads = lock(&self.uploads);
            uploads.retain(|name, _| name == current.as_str() || ready.contains(name));
            for name in ready {
                if uploads.len() >= self.in_flight {
                    break;
                }
                let Ok(file) = WalName::parse(&name) else {
                    continue;
                };
                if uploads.contains_key(&name) {
                    continue;
                }
                let upload = self.start(file, self.pgdata.join("pg_wal").join(&name));
                uploads.insert(name, upload.clone());
                started.push(upload);
            }
        }
        for upload in started {
            tokio::spawn(upload);
        }
    }

    /// The files PostgreSQL has ready for the archive, oldest first.
    fn ready(&self) -> Vec<String> {
        let status = self.pgdata.join("pg_wal").join("archive_status");
        let Ok(entries) = std::fs::read_dir(status) else {
            return Vec::new();
        };
        let mut ready: Vec<String> = entries
            .filter_map(|e| {
                let name = e.ok()?.file_name();
                name.to_str()?.strip_suffix(".ready").map(str::to_owned)
            })
            .collect();
        ready.sort();
        ready
    }

    async fn push(&self, file: &WalName, path: &Path) -> Result<Pushed, Failure> {
        let opened = self.open().await.map_err(Failure::outage)?;
        let system =
            wal::system_identifier(&self.pgdata).map_err(|e| Failure::local(e.to_string()))?;
        let archive = WalArchive::new(&opened.location, system);
        wal::push_file(opened.store.as_ref(), &archive, file, path)
            .await
            .map_err(|e| Failure::of(&e))
    }

    /// The bucket, opened on first use (and again after a failure to open).
    async fn open(&self) -> Result<&Opened, String> {
        self.opened
            .get_or_try_init(|| async {
                let (flags, namespace, cluster) = self.opener.as_ref().ok_or("no bucket")?;
                let (store, location) = flags
                    .open(namespace, cluster)
                    .await
                    .map_err(|e| e.to_string())?;
                // A store that accepts and never answers fails the upload, which is then tried
                // again: a hung upload must not hold its file's place for ever.
                let store = Box::new(Bounded::new(store, STORE_TIMEOUT));
                // Nothing is archived to a store that would overwrite a segment silently.
                let nanos = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                let probe = format!("{}wal/.tusk-create-only-{nanos}", location.prefix());
                backup_store::store::honours_create_only(store.as_ref(), &probe)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(Opened { store, location })
            })
            .await
            .map_err(|e| format!("opening the bucket: {e}"))
    }

    /// Where the continuity checks keep their last report, and are asked for one.
    pub fn continuity(&self) -> &crate::continuity_checks::Checks {
        &self.continuity
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[path = "archive_heal.rs"]
mod heal;
#[path = "standby_archive.rs"]
mod standby;

#[cfg(test)]
#[path = "archiver_tests.rs"]
mod tests;
