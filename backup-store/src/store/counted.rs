//! A store that counts the requests made through it, by kind: what the archive benchmarks
//! print (issue 46: the cost of each walk at day 1 and at day 30).

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use super::{ByteStream, ObjectInfo, ObjectStore, PendingUpload, StoreError, Upload};

/// Requests made, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Requests {
    pub lists: usize,
    pub gets: usize,
    pub puts: usize,
    pub deletes: usize,
}

/// `inner`, counting.
pub struct Counted<'a> {
    inner: &'a dyn ObjectStore,
    lists: AtomicUsize,
    gets: AtomicUsize,
    puts: AtomicUsize,
    deletes: AtomicUsize,
}

impl<'a> Counted<'a> {
    pub fn new(inner: &'a dyn ObjectStore) -> Self {
        Self {
            inner,
            lists: AtomicUsize::new(0),
            gets: AtomicUsize::new(0),
            puts: AtomicUsize::new(0),
            deletes: AtomicUsize::new(0),
        }
    }

    /// The counts so far, and zero again.
    pub fn take(&self) -> Requests {
        Requests {
            lists: self.lists.swap(0, Ordering::Relaxed),
            gets: self.gets.swap(0, Ordering::Relaxed),
            puts: self.puts.swap(0, Ordering::Relaxed),
            deletes: self.deletes.swap(0, Ordering::Relaxed),
        }
    }

    fn count(counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl ObjectStore for Counted<'_> {
    fn location(&self) -> String {
        self.inner.location()
    }
    async fn check(&self) -> Result<(), StoreError> {
        self.inner.check().await
    }
    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        Self::count(&self.puts);
        self.inner.put(key, body).await
    }
    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        Self::count(&self.puts);
        self.inner.put_if_absent(key, body).await
    }
    async fn begin_upload(&self, key: &str) -> Result<Box<dyn Upload>, StoreError> {
        Self::count(&self.puts);
        self.inner.begin_upload(key).await
    }
    async fn get(&self, key: &str) -> Result<ByteStream, StoreError> {
        Self::count(&self.gets);
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        Self::count(&self.lists);
        self.inner.list(prefix).await
    }
    async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        Self::count(&self.lists);
        self.inner.list_page(prefix, after).await
    }
    async fn delete_many(&self, keys: &[String]) -> Result<(), StoreError> {
        Self::count(&self.deletes);
        self.inner.delete_many(keys).await
    }
    async fn pending_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, StoreError> {
        Self::count(&self.lists);
        self.inner.pending_uploads(prefix).await
    }
    async fn abort_pending(&self, upload: &PendingUpload) -> Result<(), StoreError> {
        Self::count(&self.deletes);
        self.inner.abort_pending(upload).await
    }
}
