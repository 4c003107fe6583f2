//! The start-up probe that a store honours create-only writes.

use async_trait::async_trait;
use bytes::Bytes;

use super::memory::MemoryStore;
use super::*;

/// A store that ignores the create-only condition, as older MinIO releases do.
struct Overwriting(MemoryStore);

#[async_trait]
impl ObjectStore for Overwriting {
    fn location(&self) -> String {
        self.0.location()
    }
    async fn check(&self) -> Result<(), StoreError> {
        self.0.check().await
    }
    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.0.put(key, body).await
    }
    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.0.put(key, body).await
    }
    async fn begin_upload(&self, key: &str) -> Result<Box<dyn Upload>, StoreError> {
        self.0.begin_upload(key).await
    }
    async fn get(&self, key: &str) -> Result<ByteStream, StoreError> {
        self.0.get(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        self.0.list(prefix).await
    }
    async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        self.0.list_page(prefix, after).await
    }
    async fn delete_many(&self, keys: &[String]) -> Result<(), StoreError> {
        self.0.delete_many(keys).await
    }
    async fn pending_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, StoreError> {
        self.0.pending_uploads(prefix).await
    }
    async fn abort_pending(&self, upload: &PendingUpload) -> Result<(), StoreError> {
        self.0.abort_pending(upload).await
    }
}

#[tokio::test]
async fn a_store_that_honours_create_only_passes_and_keeps_nothing() {
    let store = MemoryStore::new("mem://b");
    honours_create_only(&store, "p/wal/.probe").await.unwrap();
    assert!(store.keys().is_empty());
}

#[tokio::test]
async fn a_store_that_overwrites_is_refused_by_name() {
    let store = Overwriting(MemoryStore::new("mem://old-minio"));
    let refused = honours_create_only(&store, "p/wal/.probe")
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("mem://old-minio"), "{message}");
    assert!(message.contains("If-None-Match"), "{message}");
    assert!(store.0.keys().is_empty(), "the probe is deleted either way");
}
