//! Downloading with size and sha256 checks, into a file (restore) or nowhere (verify).

use std::path::Path;

use futures::TryStreamExt;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use crate::compression::Codec;
use crate::error::AgentError;
use backup_store::layout::ClusterLocation;
use backup_store::manifest::{Manifest, ManifestFile};
use backup_store::store::ObjectStore;

/// Streams one stored file into `sink`, then checks its size and sha256 against the manifest.
pub async fn download_checked<W: AsyncWrite + Unpin>(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    manifest: &Manifest,
    file: &ManifestFile,
    sink: &mut W,
    cancel: &CancellationToken,
) -> Result<(), AgentError> {
    let key = location.object_key(&manifest.backup_id, &file.name);
    let mut stream = store.get(&key).await?;
    let mut hasher = Sha256::new();
    let mut progress = Progress::new(&key);
    loop {
        let chunk = tokio::select! {
            next = stream.try_next() => next.map_err(|e| AgentError::io(format!("downloading {key}"), e))?,
            () = cancel.cancelled() => return Err(AgentError::Interrupted),
        };
        let Some(chunk) = chunk else { break };
        hasher.update(&chunk);
        progress.add(chunk.len());
        sink.write_all(&chunk)
            .await
            .map_err(|e| AgentError::io(format!("writing {key} to the work directory"), e))?;
    }
    sink.flush()
        .await
        .map_err(|e| AgentError::io(format!("writing {key} to the work directory"), e))?;
    let sha256 = hex::encode(hasher.finalize());
    if progress.bytes() != file.size_bytes {
        return Err(AgentError::Checksum(format!(
            "{key}: size {} differs from the manifest's {}",
            progress.bytes(),
            file.size_bytes
        )));
    }
    if sha256 != file.sha256 {
        return Err(AgentError::Checksum(format!(
            "{key}: sha256 {sha256} differs from the manifest's {}",
            file.sha256
        )));
    }
    progress.log("downloaded and verified");
    Ok(())
}

/// Checks every file of a backup without keeping the bytes.
pub async fn verify_backup(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    manifest: &Manifest,
    cancel: &CancellationToken,
) -> Result<(), AgentError> {
    for file in &manifest.files {
        download_checked(
            store,
            location,
            manifest,
            file,
            &mut tokio::io::sink(),
            cancel,
        )
        .await?;
    }
    Ok(())
}

/// The downloaded dump at `path`, decoded with its manifest's compression.
pub(super) async fn open_decoded(
    manifest: &Manifest,
    path: &Path,
) -> Result<crate::compression::BoxRead, AgentError> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| AgentError::io(format!("opening {}", path.display()), e))?;
    Ok(manifest
        .compression
        .decode(BufReader::with_capacity(256 * 1024, file)))
}
