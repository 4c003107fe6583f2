//! Streams any reader into a multipart upload in fixed-size parts, hashing on the way.

use std::future::Future;

use bytes::BytesMut;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use crate::error::AgentError;
use backup_store::store::ObjectStore;

/// What was stored: exact size and sha256 of the bytes in the bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    pub key: String,
    pub size_bytes: u64,
    pub sha256: String,
}

/// Uploads everything `reader` yields to `key`. After EOF, `before_complete` runs (e.g. waits
/// for pg_dump's exit status); only if it succeeds does the object become visible. On any
/// error or cancellation the multipart upload is aborted.
pub async fn upload_stream<R, F>(
    store: &dyn ObjectStore,
    key: &str,
    mut reader: R,
    before_complete: F,
    cancel: &CancellationToken,
) -> Result<StoredObject, AgentError>
where
    R: AsyncRead + Unpin + Send,
    F: Future<Output = Result<(), AgentError>> + Send,
{
    let mut upload = store.begin_upload(key).await?;
    tracing::info!(key, "upload started");
    let part_size = upload.part_size();
    let mut hasher = Sha256::new();
    let mut progress = Progress::new(key);
    let mut part = BytesMut::with_capacity(part_size);
    let mut chunk = vec![0u8; 64 * 1024];

    let pumped: Result<(), AgentError> = async {
        loop {
            let n = tokio::select! {
                read = reader.read(&mut chunk) => read.map_err(|e| AgentError::io(format!("reading data for {key}"), e))?,
                () = cancel.cancelled() => return Err(AgentError::Interrupted),
            };
            if n == 0 {
                return Ok(());
            }
            hasher.update(&chunk[..n]);
            progress.add(n);
            let mut rest = &chunk[..n];
            while !rest.is_empty() {
                let take = rest.len().min(part_size - part.len());
                part.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if part.len() == part_size {
                    let full = std::mem::replace(&mut part, BytesMut::with_capacity(part_size));
                    tokio::select! {
                        sent = upload.put_part(full.freeze()) => sent?,
                        () = cancel.cancelled() => return Err(AgentError::Interrupted),
                    }
                }
            }
        }
    }
    .await;

    let pumped = match pumped {
        Ok(()) => before_complete.await,
        Err(e) => Err(e),
    };
    if let Err(e) = pumped {
        tracing::warn!(key, error = %e, "aborting upload");
        if let Err(abort) = upload.abort().await {
            tracing::warn!(key, error = %abort, "abort of the multipart upload failed");
        }
        return Err(e);
    }
    upload.complete(part.freeze()).await?;
    progress.log("upload complete");
    Ok(StoredObject {
        key: key.to_string(),
        size_bytes: progress.bytes(),
        sha256: hex::encode(hasher.finalize()),
    })
}
