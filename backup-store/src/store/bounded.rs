//! A deadline on every call to a store. The operator talks to endpoints its users choose: one
//! that accepts connections and never answers must fail the call, not hold a reconcile (and the
//! controller's shared reconcile slots) forever.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::time::Instant;

use super::{ByteStream, ObjectInfo, ObjectStore, PendingUpload, StoreError, Upload};

/// `inner` with each call limited to `timeout` (a download: until its last byte).
pub struct Bounded {
    inner: Box<dyn ObjectStore>,
    timeout: Duration,
}

impl Bounded {
    pub fn new(inner: Box<dyn ObjectStore>, timeout: Duration) -> Self {
        Bounded { inner, timeout }
    }

    async fn within<T>(
        &self,
        operation: &str,
        key: &str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.timed_out(operation, key))?
    }

    fn timed_out(&self, operation: &str, key: &str) -> StoreError {
        StoreError::TimedOut {
            location: self.inner.location(),
            operation: format!("{operation} {key}").trim_end().to_owned(),
            after: self.timeout,
        }
    }
}

#[async_trait]
impl ObjectStore for Bounded {
    fn location(&self) -> String {
        self.inner.location()
    }

    async fn check(&self) -> Result<(), StoreError> {
        self.within("bucket check", "", self.inner.check()).await
    }

    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.within("put", key, self.inner.put(key, body)).await
    }

    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.within("create", key, self.inner.put_if_absent(key, body))
            .await
    }

    /// Only starting the upload is bounded: parts are the caller's to time (the operator
    /// never uploads).
    async fn begin_upload(&self, key: &str) -> Result<Box<dyn Upload>, StoreError> {
        self.within("begin upload", key, self.inner.begin_upload(key))
            .await
    }

    async fn get(&self, key: &str) -> Result<ByteStream, StoreError> {
        let deadline = Instant::now() + self.timeout;
        let body = self.within("get", key, self.inner.get(key)).await?;
        let message = self.timed_out("get", key).to_string();
        // The body shares the call's deadline: a server may answer headers and then stall.
        let bounded = futures::stream::unfold(Some(body), move |body| {
            let message = message.clone();
            async move {
                let mut body = body?;
                match tokio::time::timeout_at(deadline, body.next()).await {
                    Ok(Some(chunk)) => Some((chunk, Some(body))),
                    Ok(None) => None,
                    Err(_) => Some((
                        Err(std::io::Error::new(std::io::ErrorKind::TimedOut, message)),
                        None,
                    )),
                }
            }
        });
        Ok(Box::pin(bounded))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        self.within("list", prefix, self.inner.list(prefix)).await
    }

    async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        self.within("list", prefix, self.inner.list_page(prefix, after))
            .await
    }

    async fn delete_many(&self, keys: &[String]) -> Result<(), StoreError> {
        let what = format!("{} key(s)", keys.len());
        self.within("delete", &what, self.inner.delete_many(keys))
            .await
    }

    async fn pending_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, StoreError> {
        self.within("list uploads", prefix, self.inner.pending_uploads(prefix))
            .await
    }

    async fn abort_pending(&self, upload: &PendingUpload) -> Result<(), StoreError> {
        self.within(
            "abort upload",
            &upload.key,
            self.inner.abort_pending(upload),
        )
        .await
    }
}
