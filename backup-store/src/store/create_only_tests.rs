//! Stores that do not behave: one that overwrites despite create-only (the start-up probe
//! refuses it), one that ignores where a page should start (a walk stops instead of following
//! the same page forever).

use async_trait::async_trait;
use bytes::Bytes;

use super::memory::MemoryStore;
use super::*;

/// A store that ignores the create-only condition (as older MinIO releases do) or, with
/// `ignores_start`, where a page should start.
struct Overwriting(MemoryStore, bool);

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
        let after = if self.1 { None } else { after };
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
    let store = Overwriting(MemoryStore::new("mem://old-minio"), false);
    let refused = honours_create_only(&store, "p/wal/.probe")
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("mem://old-minio"), "{message}");
    assert!(message.contains("If-None-Match"), "{message}");
    assert!(store.0.keys().is_empty(), "the probe is deleted either way");
}

#[tokio::test]
async fn a_walk_over_a_store_that_ignores_the_start_stops_with_an_error() {
    let store = Overwriting(MemoryStore::new("mem://broken"), true);
    for n in 0..(LIST_PAGE + 10) {
        store.0.insert(&format!("p/{n:06}"), "x");
    }
    let mut pages = Pager::new(&store, "p/", &[]);
    assert_eq!(
        pages.next().await.unwrap().map(|p| p.len()),
        Some(LIST_PAGE)
    );
    let again = pages.next().await.unwrap_err().to_string();
    assert!(again.contains("not past its start"), "{again}");
}
