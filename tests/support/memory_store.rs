//! The store of backup-store's `MemoryStore` behind the operator's `Buckets` trait, for mock API
//! scenarios. The real stores are exercised by the agent's tests and the end-to-end suite.

use async_trait::async_trait;
use backup_store::ObjectStore;
use backup_store::store::memory::MemoryStore;
use bytes::Bytes;
use tusk::crd::Destination;
use tusk::runtime::buckets::{BucketError, Buckets};

/// Every destination opens the same in-memory bucket, `s3://backups`.
#[derive(Clone)]
pub struct MemoryBucket(MemoryStore);

impl Default for MemoryBucket {
    fn default() -> Self {
        Self(MemoryStore::new("s3://backups"))
    }
}

impl MemoryBucket {
    pub fn put(&self, key: &str, body: impl Into<Bytes>) {
        self.0.insert(key, body);
    }

    /// [`MemoryBucket::put`], listed as last modified at `at` (RFC 3339).
    pub fn put_at(&self, key: &str, body: impl Into<Bytes>, at: &str) {
        self.0
            .insert_at(key, body, at.parse().expect("an RFC 3339 time"));
    }

    pub fn keys(&self) -> Vec<String> {
        self.0.keys()
    }

    /// Every call fails like a store that is down while set.
    pub fn set_unreachable(&self, down: bool) {
        self.0.set_unreachable(down);
    }
}

#[async_trait]
impl Buckets for MemoryBucket {
    async fn open(&self, _: &str, _: &Destination) -> Result<Box<dyn ObjectStore>, BucketError> {
        Ok(Box::new(self.0.clone()))
    }
}
