//! An object store in memory, for tests of code written against `ObjectStore`: this crate's
//! catalog and ownership rules, and the operator's mock-API scenarios. Clones share the same
//! objects, so a test keeps a handle on what the code under test wrote.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;

use super::{ByteStream, ObjectInfo, ObjectStore, PendingUpload, StoreError, Upload};

#[derive(Clone, Debug)]
pub struct MemoryStore {
    location: String,
    objects: Arc<Mutex<BTreeMap<String, Bytes>>>,
    /// Times given with [`MemoryStore::insert_at`]; other objects list none.
    modified: Arc<Mutex<BTreeMap<String, jiff::Timestamp>>>,
    uploads: Arc<Mutex<Vec<PendingUpload>>>,
    /// Every call fails like a store that is down while set.
    unreachable: Arc<AtomicBool>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new("s3://memory")
    }
}

impl MemoryStore {
    /// Up to `max` objects under `prefix` after `after`, in key order.
    fn listed(&self, prefix: &str, after: Option<&str>, max: usize) -> Vec<ObjectInfo> {
        let modified = self
            .modified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        self.objects()
            .iter()
            .filter(|(k, _)| k.starts_with(prefix) && after.is_none_or(|a| k.as_str() > a))
            .take(max)
            .map(|(k, v)| ObjectInfo {
                key: k.clone(),
                size: v.len() as u64,
                last_modified: modified.get(k).copied(),
            })
            .collect()
    }

    /// An empty store that names itself `location` (e.g. `s3://backups`) in errors.
    pub fn new(location: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            objects: Arc::default(),
            modified: Arc::default(),
            uploads: Arc::default(),
            unreachable: Arc::default(),
        }
    }

    /// Stores `body` at `key` directly (test setup; not subject to `set_unreachable`).
    pub fn insert(&self, key: &str, body: impl Into<Bytes>) {
        self.objects().insert(key.to_owned(), body.into());
    }

    /// [`MemoryStore::insert`], listed as last modified `at`.
    pub fn insert_at(&self, key: &str, body: impl Into<Bytes>, at: jiff::Timestamp) {
        self.insert(key, body);
        let mut modified = self.modified.lock().unwrap_or_else(|p| p.into_inner());
        modified.insert(key.to_owned(), at);
    }

    pub fn keys(&self) -> Vec<String> {
        self.objects().keys().cloned().collect()
    }

    /// Multipart uploads left open, as a killed writer leaves them.
    pub fn open_uploads(&self, uploads: impl IntoIterator<Item = PendingUpload>) {
        self.uploads().extend(uploads);
    }

    /// Keys of the uploads still open.
    pub fn open_upload_keys(&self) -> Vec<String> {
        self.uploads().iter().map(|u| u.key.clone()).collect()
    }

    pub fn set_unreachable(&self, down: bool) {
        self.unreachable.store(down, Ordering::SeqCst);
    }

    // A test that panicked while holding a lock must not hide the failure behind poisoning.
    fn objects(&self) -> MutexGuard<'_, BTreeMap<String, Bytes>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn uploads(&self) -> MutexGuard<'_, Vec<PendingUpload>> {
        self.uploads.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reachable(&self, operation: &str) -> Result<(), StoreError> {
        if self.unreachable.load(Ordering::SeqCst) {
            return Err(StoreError::Other {
                location: self.location.clone(),
                operation: operation.into(),
                source: "connection refused".into(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl ObjectStore for MemoryStore {
    fn location(&self) -> String {
        self.location.clone()
    }
    async fn check(&self) -> Result<(), StoreError> {
        self.reachable("check")
    }
    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.reachable("put")?;
        self.objects().insert(key.to_owned(), body);
        Ok(())
    }
    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.reachable("put")?;
        let mut objects = self.objects();
        if objects.contains_key(key) {
            return Err(StoreError::AlreadyExists {
                location: self.location(),
                key: key.to_owned(),
            });
        }
        objects.insert(key.to_owned(), body);
        Ok(())
    }
    async fn begin_upload(&self, _: &str) -> Result<Box<dyn Upload>, StoreError> {
        Err(StoreError::Config(
            "the in-memory store takes whole objects only".into(),
        ))
    }
    async fn get(&self, key: &str) -> Result<ByteStream, StoreError> {
        self.reachable("get")?;
        let body = self
            .objects()
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound {
                location: self.location(),
                key: key.to_owned(),
            })?;
        Ok(Box::pin(futures::stream::iter([Ok(body)])))
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        self.reachable("list")?;
        let listed = self.listed(prefix, None, usize::MAX);
        // The real stores' cap, so that tests meet it where users would.
        let mut budget = super::ListBudget::new(&self.location, format!("list {prefix}"));
        for page in listed.chunks(super::LIST_PAGE) {
            budget.page(page.len())?;
        }
        Ok(listed)
    }
    async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        self.reachable("list")?;
        Ok(self.listed(prefix, after, super::LIST_PAGE))
    }
    async fn delete_many(&self, keys: &[String]) -> Result<(), StoreError> {
        self.reachable("delete")?;
        let mut objects = self.objects();
        for key in keys {
            objects.remove(key);
        }
        Ok(())
    }
    async fn pending_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, StoreError> {
        self.reachable("list uploads")?;
        Ok(self
            .uploads()
            .iter()
            .filter(|u| u.key.starts_with(prefix))
            .cloned()
            .collect())
    }
    async fn abort_pending(&self, upload: &PendingUpload) -> Result<(), StoreError> {
        self.reachable("abort upload")?;
        self.uploads().retain(|u| u != upload);
        Ok(())
    }
}
