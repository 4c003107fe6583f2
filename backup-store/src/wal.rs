//! The WAL archive, shared by the agent's `wal-push`/`wal-fetch` and the instance manager's
//! archiver: PostgreSQL's `archive_command` and `restore_command` ends of it (issue 27,
//! `docs/src/design/pitr.md` §1 and §3). A file PostgreSQL archives is stored compressed (zstd, with
//! its content checksum, which every fetch verifies) under the database system's identifier:
//!
//! ```text
//! <path>/<namespace>/<cluster>/wal/<system identifier>/<timeline>/<segment>.zst
//! <path>/<namespace>/<cluster>/wal/<system identifier>/history/<timeline>.history.zst
//! <path>/<namespace>/<cluster>/wal/<system identifier>/gaps/<first>-<last>.json
//! ```
//!
//! A gap marker records WAL released unarchived by the disk policy (a full volume while the
//! bucket failed).
//!
//! A re-created cluster (same name, new system) therefore never writes into, or interleaves
//! with, another system's WAL. A file is created only if absent: archiving the same bytes again
//! succeeds (PostgreSQL retries after a crash), different bytes under the same name are refused
//! and never overwrite what is stored. A fetch tells "not in the archive" (a real not-found) from
//! every other failure, which must never end a recovery early.

use std::path::Path;

use async_compression::tokio::bufread::{ZstdDecoder, ZstdEncoder};
use async_compression::zstd::CParameter;
use bytes::Bytes;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufRead, AsyncReadExt, BufReader};

use crate::ClusterLocation;
use crate::store::{self, ObjectStore, StoreError};

/// More than any WAL file (segments are at most 1 GiB).
const UNPACKED_LIMIT: u64 = 1 << 30;

/// What went wrong archiving or fetching a WAL file.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("{0:?} is not a WAL file name PostgreSQL archives")]
    Name(String),
    #[error(transparent)]
    Lsn(#[from] crate::lsn::InvalidLsn),
    #[error("{0} bytes is not a WAL segment size (a power of two from 1 MiB to 1 GiB)")]
    SegmentSize(u64),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("reading the backups: {0}")]
    Catalog(#[from] crate::catalog::CatalogError),
    /// Another file under this name holds other bytes: two writers of one timeline, or a
    /// restored system writing where it should not. Never overwritten.
    #[error(
        "{name} is already archived with different contents (sha256 {stored} there, {local} \
         here): refusing to overwrite it"
    )]
    Conflict {
        name: String,
        stored: String,
        local: String,
    },
    #[error("{name} in the archive is damaged: {reason}")]
    Damaged { name: String, reason: String },
    #[error("reading the database system identifier from {path}: {reason}")]
    SystemIdentifier { path: String, reason: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// A file name PostgreSQL hands to `archive_command`, with the timeline it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalName {
    name: String,
    timeline: String,
    history: bool,
}

impl WalName {
    /// A segment (`000000010000000000000003`), a partial segment (`…03.partial`, written at a
    /// promotion), a backup history file (`…03.00000028.backup`) or a timeline history file
    /// (`00000002.history`). Anything else is refused: the name becomes part of a key.
    pub fn parse(name: &str) -> Result<Self, WalError> {
        let hex = |s: &str, len: usize| {
            s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'A'..=b'F'))
        };
        let refused = || WalError::Name(name.to_owned());
        if let Some(timeline) = name.strip_suffix(".history") {
            return hex(timeline, 8)
                .then(|| Self {
                    name: name.to_owned(),
                    timeline: timeline.to_owned(),
                    history: true,
                })
                .ok_or_else(refused);
        }
        let (segment, rest) = name.split_at_checked(24).ok_or_else(refused)?;
        let suffix_ok = match rest {
            "" | ".partial" => true,
            backup => backup
                .strip_prefix('.')
                .and_then(|b| b.strip_suffix(".backup"))
                .is_some_and(|offset| hex(offset, 8)),
        };
        if !hex(segment, 24) || !suffix_ok {
            return Err(refused());
        }
        Ok(Self {
            name: name.to_owned(),
            timeline: segment[..8].to_owned(),
            history: false,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.name
    }
}

/// Where one database system's WAL lives in the cluster's location.
#[derive(Debug, Clone)]
pub struct WalArchive {
    prefix: String,
}

impl WalArchive {
    pub fn new(location: &ClusterLocation, system_identifier: u64) -> Self {
        Self {
            prefix: location.wal_prefix(system_identifier),
        }
    }

    /// Where every file of this system's archive is, ending with `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key of the verification restore point `name` ([`crate::points`]).
    pub fn point_key(&self, name: &str) -> String {
        format!("{}points/{name}.json", self.prefix)
    }

    /// The object key of `file`.
    pub fn key(&self, file: &WalName) -> String {
        format!("{}{}.zst", self.folder(file), file.name)
    }

    /// The key of a gap marker named `name` (the disk policy, docs/src/design/pitr.md §7).
    pub fn gap_key(&self, name: &str) -> String {
        format!("{}gaps/{name}.json", self.prefix)
    }

    /// The prefix `file` is stored under: its timeline's, or the history files'.
    pub fn folder(&self, file: &WalName) -> String {
        if file.history {
            format!("{}history/", self.prefix)
        } else {
            format!("{}{}/", self.prefix, file.timeline)
        }
    }
}

/// What archiving a file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    Stored,
    /// The same bytes were already there (a retry after a crash): nothing written.
    AlreadyArchived,
}

/// Archives `contents` as `file`: compressed and created only if absent; if present, it must
/// hold the same bytes.
pub async fn push(
    store: &dyn ObjectStore,
    archive: &WalArchive,
    file: &WalName,
    contents: &[u8],
) -> Result<Pushed, WalError> {
    let packed = compress(contents).await.map_err(io("compressing"))?;
    store_packed(store, archive, file, packed, || async {
        Ok(contents.to_vec())
    })
    .await
}

/// [`push`] of the file at `path`, compressed as it is read: only the compressed bytes are
/// held in memory, and the file is read again only to compare it with a copy already stored.
pub async fn push_file(
    store: &dyn ObjectStore,
    archive: &WalArchive,
    file: &WalName,
    path: &Path,
) -> Result<Pushed, WalError> {
    let context = format!("reading {}", path.display());
    let opened = tokio::fs::File::open(path).await.map_err(io(&context))?;
    let packed = compress(BufReader::with_capacity(1 << 20, opened))
        .await
        .map_err(io(&context))?;
    let read = || async { tokio::fs::read(path).await.map_err(io(&context)) };
    store_packed(store, archive, file, packed, read).await
}

async fn store_packed<F, Fut>(
    store: &dyn ObjectStore,
    archive: &WalArchive,
    file: &WalName,
    packed: Vec<u8>,
    local: F,
) -> Result<Pushed, WalError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<u8>, WalError>>,
{
    match store
        .put_if_absent(&archive.key(file), Bytes::from(packed))
        .await
    {
        Ok(()) => return Ok(Pushed::Stored),
        Err(e) if e.is_already_exists() => {}
        Err(e) => return Err(e.into()),
    }
    let stored = fetch(store, archive, file)
        .await?
        // Deleted between the two calls: only retention does that, and not to fresh WAL.
        .ok_or_else(|| WalError::Damaged {
            name: file.name.clone(),
            reason: "it vanished while being compared".to_owned(),
        })?;
    let (stored, local) = (sha256(&stored), sha256(&local().await?));
    if stored == local {
        Ok(Pushed::AlreadyArchived)
    } else {
        Err(WalError::Conflict {
            name: file.name.clone(),
            stored,
            local,
        })
    }
}

/// The contents of `file`, or `None` if the archive has no such file (a real not-found: any
/// other failure is an error). The content checksum is verified.
pub async fn fetch(
    store: &dyn ObjectStore,
    archive: &WalArchive,
    file: &WalName,
) -> Result<Option<Vec<u8>>, WalError> {
    let packed = match store::get_bytes(store, &archive.key(file)).await {
        Ok(packed) => packed,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    decompress(&packed)
        .await
        .map(Some)
        .map_err(|e| WalError::Damaged {
            name: file.name.clone(),
            reason: e.to_string(),
        })
}

/// The database system identifier recorded in `pgdata`'s control file (its first eight bytes,
/// in the machine's byte order, as PostgreSQL writes them).
pub fn system_identifier(pgdata: &Path) -> Result<u64, WalError> {
    let path = pgdata.join("global").join("pg_control");
    let failed = |reason: String| WalError::SystemIdentifier {
        path: path.display().to_string(),
        reason,
    };
    let bytes = std::fs::read(&path).map_err(|e| failed(e.to_string()))?;
    let first: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| failed("shorter than eight bytes".to_owned()))?;
    Ok(u64::from_ne_bytes(first))
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn io(context: &str) -> impl FnOnce(std::io::Error) -> WalError {
    let context = context.to_owned();
    move |source| WalError::Io { context, source }
}

/// zstd at its default level, with the frame's content checksum.
pub(crate) async fn compress(contents: impl AsyncBufRead + Unpin) -> std::io::Result<Vec<u8>> {
    let params = [CParameter::checksum_flag(true)];
    let mut encoder =
        ZstdEncoder::with_quality_and_params(contents, async_compression::Level::Fastest, &params);
    let mut packed = Vec::new();
    encoder.read_to_end(&mut packed).await?;
    Ok(packed)
}

async fn decompress(packed: &[u8]) -> std::io::Result<Vec<u8>> {
    let decoder = ZstdDecoder::new(packed);
    let mut contents = Vec::new();
    decoder
        .take(UNPACKED_LIMIT)
        .read_to_end(&mut contents)
        .await?;
    Ok(contents)
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
