//! WAL fetched ahead of a restore's recovery (`docs/src/design/pitr.md` §5): when PostgreSQL asks
//! for a segment, the next [`AHEAD`] segments of its timeline are downloaded in parallel into a
//! spool beside PGDATA (the same volume, so handing one over is a rename), and the next request
//! finds its file there or waits for its download. PostgreSQL then replays while the following
//! files arrive, instead of waiting for one download per segment.
//!
//! Only successes are kept. A file not in the archive (yet) or a failed download is forgotten:
//! PostgreSQL's own request fetches it again, and only that answer counts — "not there" only
//! on a real not-found, never from a prefetch.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Segments downloaded ahead of the one PostgreSQL replays: as many as the archiver uploads at
/// once. Each is one agent process holding one segment in memory.
pub const AHEAD: u64 = 4;

/// The spool of a restore's prefetched segments: `<PGDATA>.tusk-wal-spool`.
pub fn spool_dir(pgdata: &Path) -> PathBuf {
    let mut dir = pgdata.as_os_str().to_owned();
    dir.push(".tusk-wal-spool");
    PathBuf::from(dir)
}

/// The segment after `name` (`TTTTTTTTXXXXXXXXSSSSSSSS`) for segments of `size` bytes, on the
/// same timeline; None for anything but a plain segment name or an impossible size.
pub fn next_segment(name: &str, size: u64) -> Option<String> {
    if name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if !size.is_power_of_two() || !(1 << 20..=1 << 30).contains(&size) {
        return None;
    }
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let (log, seg) = (hex(&name[8..16])?, hex(&name[16..24])?);
    let per_log = 0x1_0000_0000 / size;
    let (log, seg) = if seg + 1 >= per_log {
        (log.checked_add(1)?, 0)
    } else {
        (log, seg + 1)
    };
    (log <= 0xFFFF_FFFF).then(|| format!("{}{log:08X}{seg:08X}", &name[..8]))
}

/// Downloads one WAL file into a path; true when it is there afterwards.
pub type Download =
    Arc<dyn Fn(String, PathBuf) -> futures::future::BoxFuture<'static, bool> + Send + Sync>;

pub struct Prefetcher {
    dir: PathBuf,
    download: Download,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Downloads under way: a receiver turns true when each ends.
    in_flight: HashMap<String, watch::Receiver<bool>>,
    /// Learnt from the first segment PostgreSQL received (every segment has the same size).
    segment_size: Option<u64>,
}

impl Prefetcher {
    pub fn new(dir: PathBuf, download: Download) -> Result<Arc<Self>, std::io::Error> {
        std::fs::create_dir_all(&dir)?;
        Ok(Arc::new(Self {
            dir,
            download,
            state: Mutex::new(State::default()),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands over `name` into `path` if it was fetched ahead (waiting for a download under way);
    /// false when PostgreSQL's request must fetch it itself.
    pub async fn take(&self, name: &str, path: &Path) -> bool {
        let pending = self.state().in_flight.get(name).cloned();
        if let Some(mut done) = pending {
            let _ = done.wait_for(|ended| *ended).await;
        }
        std::fs::rename(self.dir.join(name), path).is_ok()
    }

    /// After PostgreSQL received segment `name` at `path`: downloads the next [`AHEAD`]
    /// segments of its timeline that are neither spooled nor under way.
    pub fn ahead_of(self: &Arc<Self>, name: &str, path: &Path) {
        let mut state = self.state();
        // Only a segment tells the size (a history file, also handed over here, does not).
        if state.segment_size.is_none() && next_segment(name, 1 << 20).is_some() {
            let size = std::fs::metadata(path).ok().map(|m| m.len());
            state.segment_size = size.filter(|&s| next_segment(name, s).is_some());
        }
        let Some(size) = state.segment_size else {
            return;
        };
        let mut next = name.to_owned();
        for _ in 0..AHEAD {
            let Some(following) = next_segment(&next, size) else {
                return;
            };
            next = following;
            let spooled = self.dir.join(&next);
            if state.in_flight.contains_key(&next) || spooled.exists() {
                continue;
            }
            let (ended, done) = watch::channel(false);
            state.in_flight.insert(next.clone(), done);
            let (this, file) = (self.clone(), next.clone());
            tokio::spawn(async move {
                if !(this.download)(file.clone(), spooled.clone()).await {
                    let _ = std::fs::remove_file(&spooled);
                }
                this.state().in_flight.remove(&file);
                let _ = ended.send(true);
            });
        }
    }
}

#[cfg(test)]
#[path = "restore_prefetch_tests.rs"]
mod tests;
