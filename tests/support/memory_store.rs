//! An in-memory bucket behind the operator's `Buckets` trait, for mock API scenarios. The real
//! stores are exercised by the agent's tests and the end-to-end suite.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use backup_store::store::{ByteStream, ObjectInfo, PendingUpload, Upload};
use backup_store::{ObjectStore, StoreError};
use bytes::Bytes;
use tusk::crd::Destination;
use tusk::runtime::buckets::{BucketError, Buckets};

/// Objects by key; `reachable: false` makes every call fail like a store that is down.
#[derive(Clone, Default)]
pub struct MemoryBucket {
    objects: Arc<Mutex<BTreeMap<String, Bytes>>>,
    unreachable: Arc<Mutex<bool>>,
}

impl MemoryBucket {
    pub fn put(&self, key: &str, body: impl Into<Bytes>) {
        self.lock().insert(key.to_owned(), body.into());
    }

    pub fn keys(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    pub fn set_unreachable(&self, down: bool) {
        *self.unreachable.lock().unwrap_or_else(|p| p.into_inner()) = down;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Bytes>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check(&self, operation: &str) -> Result<(), StoreError> {
        if *self.unreachable.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(StoreError::Other {
                location: "s3://memory".into(),
                operation: operation.into(),
                source: "connection refused".into(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl Buckets for MemoryBucket {
    async fn open(&self, _: &str, _: &Destination) -> Result<Box<dyn ObjectStore>, BucketError> {
        Ok(Box::new(self.clone()))
    }
}

#[async_trait]
impl ObjectStore for MemoryBucket {
    fn location(&self) -> String {
        "s3://backups".into()
    }
    async fn check(&self) -> Result<(), StoreError> {
        self.check("check")
    }
    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.check("put")?;
        self.lock().insert(key.to_owned(), body);
        Ok(())
    }
    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.check("put")?;
        let mut objects = self.lock();
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
        Err(StoreError::Config("the operator never uploads".into()))
    }
    async fn get(&self, key: &str) -> Result<ByteStream, StoreError> {
        self.check("get")?;
        let body = self
            .lock()
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound {
                location: self.location(),
                key: key.to_owned(),
            })?;
        Ok(Box::pin(futures::stream::iter([Ok(body)])))
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        self.check("list")?;
        Ok(self
            .lock()
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| ObjectInfo {
                key: k.clone(),
                size: v.len() as u64,
                last_modified: None,
            })
            .collect())
    }
    async fn delete_many(&self, keys: &[String]) -> Result<(), StoreError> {
        self.check("delete")?;
        let mut objects = self.lock();
        for key in keys {
            objects.remove(key);
        }
        Ok(())
    }
    async fn pending_uploads(&self, _: &str) -> Result<Vec<PendingUpload>, StoreError> {
        self.check("list uploads")?;
        Ok(Vec::new())
    }
    async fn abort_pending(&self, _: &PendingUpload) -> Result<(), StoreError> {
        Ok(())
    }
}
