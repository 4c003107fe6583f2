//! An in-memory store for this crate's unit tests: catalog and ownership rules on plain values.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::{ByteStream, ObjectInfo, ObjectStore, PendingUpload, StoreError, Upload};

#[derive(Default)]
pub(crate) struct Memory {
    objects: Mutex<BTreeMap<String, Bytes>>,
    pub(crate) uploads: Mutex<Vec<PendingUpload>>,
}

impl Memory {
    pub(crate) fn keys(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Bytes>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn uploads(&self) -> std::sync::MutexGuard<'_, Vec<PendingUpload>> {
        self.uploads.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl ObjectStore for Memory {
    fn location(&self) -> String {
        "s3://memory".into()
    }
    async fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.lock().insert(key.to_owned(), body);
        Ok(())
    }
    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
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
        Err(StoreError::Config("not in unit tests".into()))
    }
    async fn get(&self, key: &str) -> Result<ByteStream, StoreError> {
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
        let mut objects = self.lock();
        for key in keys {
            objects.remove(key);
        }
        Ok(())
    }
    async fn pending_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, StoreError> {
        Ok(self
            .uploads()
            .iter()
            .filter(|u| u.key.starts_with(prefix))
            .cloned()
            .collect())
    }
    async fn abort_pending(&self, upload: &PendingUpload) -> Result<(), StoreError> {
        self.uploads().retain(|u| u != upload);
        Ok(())
    }
}
