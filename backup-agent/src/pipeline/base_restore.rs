//! `base-restore`: a base backup unpacked into a new data directory, ready for PostgreSQL to
//! recover from the archive. It streams (no local copy of the tar): download → sha256 and size
//! → decompress → unpack into `<pgdata>.tusk-partial`, then `pg_verifybackup` checks every file
//! against PostgreSQL's own `backup_manifest`, and only then is the directory renamed to
//! `<pgdata>`: a damaged or interrupted restore never leaves a data directory that looks whole.

use std::path::{Path, PathBuf};

use futures::TryStreamExt;
use sha2::{Digest, Sha256};
use tokio::io::BufReader;
use tokio_util::io::{StreamReader, SyncIoBridge};

use super::inspect::Inspect;
use crate::compression::Codec;
use crate::error::AgentError;
use backup_store::catalog;
use backup_store::layout::ClusterLocation;
use backup_store::live_history::LiveHistories;
use backup_store::manifest::{FileKind, Manifest, Method};
use backup_store::store::ObjectStore;

pub struct BaseRestoreOptions {
    pub location: ClusterLocation,
    /// A backup id, or `latest`.
    pub backup_id: String,
    /// Must not exist, or be an empty directory.
    pub pgdata: PathBuf,
    /// Where `pg_verifybackup` is; PATH when unset.
    pub bin_dir: Option<PathBuf>,
    /// Only a backup completed by a time, or consistent by a WAL position (a restore to it).
    pub before: Option<catalog::Bound>,
}

pub async fn run_base_restore(
    store: &dyn ObjectStore,
    options: &BaseRestoreOptions,
) -> Result<Manifest, AgentError> {
    // Recovery follows the newest timeline: a base backup off its history cannot start it.
    let live = LiveHistories::of_location(store, &options.location).await?;
    let manifest = catalog::resolve_usable(
        store,
        &options.location,
        &options.backup_id,
        Some(Method::Physical),
        options.before,
        &|m| m.physical.as_ref().and_then(|p| live.why_not(p)),
    )
    .await?;
    let file = manifest
        .files
        .iter()
        .find(|f| f.kind == FileKind::Base)
        .ok_or_else(|| {
            AgentError::Integrity(format!(
                "the manifest of base backup {} lists no base.tar",
                manifest.backup_id
            ))
        })?;
    let pgdata = &options.pgdata;
    let empty = std::fs::read_dir(pgdata).map(|mut d| d.next().is_none());
    if matches!(empty, Ok(false)) {
        return Err(AgentError::TargetNotEmpty(format!(
            "{} is not empty",
            pgdata.display()
        )));
    }
    let staging = staging_dir(pgdata)?;
    let unpacked = async {
        let key = options.location.object_key(&manifest.backup_id, &file.name);
        let stream = store.get(&key).await?;
        let (hashed, digest) = hashing(StreamReader::new(stream.map_err(std::io::Error::other)));
        let decoded = manifest
            .compression
            .decode(BufReader::with_capacity(256 * 1024, hashed));
        let bridge = SyncIoBridge::new(decoded);
        let into = staging.clone();
        let unpack = move || {
            let mut archive = tar::Archive::new(bridge);
            archive.unpack(&into)?;
            // The end-of-archive blocks and any padding: the digest covers every stored byte.
            std::io::copy(&mut archive.into_inner(), &mut std::io::sink()).map(|_| ())
        };
        tokio::task::spawn_blocking(unpack)
            .await
            .map_err(|e| AgentError::Other(format!("unpacking {key}: {e}")))?
            .map_err(|e| unpack_error(&key, e))?;
        let (size, sha256) = {
            let digest = digest.lock().unwrap_or_else(|e| e.into_inner());
            (digest.0, hex::encode(digest.1.clone().finalize()))
        };
        if size != file.size_bytes || sha256 != file.sha256 {
            return Err(AgentError::Checksum(format!(
                "{key}: {size} bytes with sha256 {sha256}, the manifest says {} and {}",
                file.size_bytes, file.sha256
            )));
        }
        verify_backup(options.bin_dir.as_deref(), &staging).await
    }
    .await;
    if let Err(e) = unpacked {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    if empty.is_ok() {
        std::fs::remove_dir(pgdata)
            .map_err(|e| AgentError::io(format!("replacing {}", pgdata.display()), e))?;
    }
    std::fs::rename(&staging, pgdata)
        .map_err(|e| AgentError::io(format!("moving the restore to {}", pgdata.display()), e))?;
    Ok(manifest)
}

/// A failure to unpack is the stored bytes' (they do not decompress, or are no tar) unless
/// the local filesystem refused.
fn unpack_error(key: &str, e: std::io::Error) -> AgentError {
    use std::io::ErrorKind::*;
    match e.kind() {
        PermissionDenied | StorageFull | ReadOnlyFilesystem | QuotaExceeded | AlreadyExists => {
            AgentError::io(format!("unpacking {key}"), e)
        }
        _ => AgentError::Integrity(format!("{key} cannot be unpacked: {e}")),
    }
}

/// `<pgdata>.tusk-partial`, empty and private (PostgreSQL wants 0700).
fn staging_dir(pgdata: &Path) -> Result<PathBuf, AgentError> {
    let name = pgdata
        .file_name()
        .ok_or_else(|| AgentError::Usage(format!("{} names no directory", pgdata.display())))?;
    let staging = pgdata.with_file_name(format!("{}.tusk-partial", name.to_string_lossy()));
    let failed = |e| AgentError::io(format!("preparing {}", staging.display()), e);
    match std::fs::remove_dir_all(&staging) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
        _ => {}
    }
    std::fs::create_dir_all(&staging).map_err(failed)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
    Ok(staging)
}

/// `pg_verifybackup` without WAL (the archive holds it): every file against the checksums
/// PostgreSQL wrote in the backup's `backup_manifest`.
async fn verify_backup(bin_dir: Option<&Path>, dir: &Path) -> Result<(), AgentError> {
    let program = bin_dir.map_or_else(
        || PathBuf::from("pg_verifybackup"),
        |d| d.join("pg_verifybackup"),
    );
    let out = tokio::process::Command::new(&program)
        .arg("--no-parse-wal")
        .arg("--quiet")
        .arg(dir)
        .output()
        .await
        .map_err(|e| AgentError::io(format!("running {}", program.display()), e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(AgentError::Integrity(format!(
        "pg_verifybackup: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

type Digested = std::sync::Arc<std::sync::Mutex<(u64, Sha256)>>;

/// `inner`, counted and hashed into the digest as it is read (a decoder stops at the end of
/// its frame without reading the stream's end, so the digest is kept as it goes).
fn hashing<R>(inner: R) -> (Inspect<R, impl FnMut(&[u8]) + Unpin>, Digested) {
    let digest = Digested::default();
    let into = digest.clone();
    let reader = Inspect::new(inner, move |bytes: &[u8]| {
        let mut digest = into.lock().unwrap_or_else(|e| e.into_inner());
        digest.0 += bytes.len() as u64;
        digest.1.update(bytes);
    });
    (reader, digest)
}
