//! Resumable upload: chunks are PUT in order with Content-Range; one request in flight while
//! the caller fills the next chunk.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::task::JoinHandle;

use super::{TokenProvider, send};
use crate::store::{Context, StoreError, Upload};

/// A multiple of 256 KiB, as resumable uploads require.
pub const CHUNK_SIZE: usize = 8 * 1024 * 1024;

pub struct GcsUpload {
    http: reqwest::Client,
    auth: Arc<TokenProvider>,
    location: String,
    key: String,
    session: String,
    offset: u64,
    in_flight: Option<JoinHandle<Result<(), StoreError>>>,
}

impl GcsUpload {
    pub fn new(
        http: reqwest::Client,
        auth: Arc<TokenProvider>,
        location: String,
        key: String,
        session: String,
    ) -> Self {
        GcsUpload {
            http,
            auth,
            location,
            key,
            session,
            offset: 0,
            in_flight: None,
        }
    }

    async fn wait(&mut self) -> Result<(), StoreError> {
        if let Some(handle) = self.in_flight.take() {
            handle.await.map_err(|e| StoreError::Other {
                location: self.location.clone(),
                operation: format!("upload {}", self.key),
                source: Context::boxed("upload task failed", e),
            })??;
        }
        Ok(())
    }

    /// `total` is known only for the final chunk.
    fn spawn_chunk(&mut self, data: Bytes, total: Option<u64>) {
        let len = data.len() as u64;
        let range = match (len, total) {
            (0, Some(total)) => format!("bytes */{total}"),
            (_, Some(total)) => format!("bytes {}-{}/{total}", self.offset, self.offset + len - 1),
            (_, None) => format!("bytes {}-{}/*", self.offset, self.offset + len - 1),
        };
        self.offset += len;
        let (auth, location, key) = (self.auth.clone(), self.location.clone(), self.key.clone());
        let request = self
            .http
            .put(&self.session)
            .header(reqwest::header::CONTENT_RANGE, range)
            .body(data);
        self.in_flight = Some(tokio::spawn(async move {
            send(&auth, &location, request, "upload chunk", &key).await?;
            Ok(())
        }));
    }
}

#[async_trait]
impl Upload for GcsUpload {
    fn part_size(&self) -> usize {
        CHUNK_SIZE
    }

    async fn put_part(&mut self, data: Bytes) -> Result<(), StoreError> {
        self.wait().await?;
        self.spawn_chunk(data, None);
        Ok(())
    }

    async fn complete(mut self: Box<Self>, last: Bytes) -> Result<(), StoreError> {
        self.wait().await?;
        let total = self.offset + last.len() as u64;
        self.spawn_chunk(last, Some(total));
        self.wait().await
    }

    async fn abort(mut self: Box<Self>) -> Result<(), StoreError> {
        if let Some(handle) = self.in_flight.take() {
            handle.abort();
        }
        // Cancelling a session answers 499; either way no object is created.
        let _ = self.http.delete(&self.session).send().await;
        Ok(())
    }
}
