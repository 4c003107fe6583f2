//! The object-store interface shared by the agent and the operator, with S3 and GCS backends.

mod bounded;
mod counted;
mod error;
pub mod gcs;
// Public: the operator's mock-API scenarios use it too (a few dozen lines, no dependencies).
pub mod memory;
pub mod s3;

use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream;

pub use bounded::Bounded;
pub use counted::{Counted, Requests};
pub(crate) use error::Refusal;
pub use error::{BoxError, Context, HttpStatus, StoreError, chain};

/// Most objects one listing returns. A cluster's prefix holds a manifest and one file per
/// database for each kept backup, far below this; more means a wrong prefix or a hostile
/// endpoint, and an error is better than memory exhausted by an endless listing.
pub const MAX_LIST_OBJECTS: usize = 100_000;
/// Most result pages one listing follows: a server can hand out continuation tokens forever.
pub const MAX_LIST_PAGES: usize = 1_000;
/// Largest object [`get_bytes`] reads; manifests are a few KiB.
pub const MAX_SMALL_OBJECT_BYTES: usize = 16 << 20;

/// A download: a stream of chunks.
pub type ByteStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    pub last_modified: Option<jiff::Timestamp>,
}

/// An in-progress upload started with an [`ObjectStore::begin_upload`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingUpload {
    pub key: String,
    pub upload_id: String,
    pub initiated: Option<jiff::Timestamp>,
}

/// A streaming upload. Parts are sent in order; the implementation bounds how many are in
/// flight, so callers' memory stays at a few parts whatever the object size.
#[async_trait]
pub trait Upload: Send {
    /// Minimum size of every part but the last (S3: 5 MiB; GCS: a multiple of 256 KiB).
    fn part_size(&self) -> usize;
    /// Sends a non-final part of exactly [`Upload::part_size`] bytes.
    async fn put_part(&mut self, data: Bytes) -> Result<(), StoreError>;
    /// Sends the final (possibly empty) part and makes the object visible.
    async fn complete(self: Box<Self>, last: Bytes) -> Result<(), StoreError>;
    /// Discards everything sent so far. The object never becomes visible.
    async fn abort(self: Box<Self>) -> Result<(), StoreError>;
}

#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// e.g. `s3://bucket` — used in messages and the Backup status location.
    fn location(&self) -> String;
    /// Checks the credentials and that the bucket exists.
    async fn check(&self) -> Result<(), StoreError>;
    /// Writes a small object in one request.
    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError>;
    /// Writes a small object only if `key` does not exist yet, atomically on the server (S3
    /// `If-None-Match: *`, GCS `ifGenerationMatch=0`); [`StoreError::AlreadyExists`] otherwise.
    /// Two writers of the same backup id rely on it: the second fails instead of overwriting.
    /// No default: a store that silently overwrote would defeat the purpose.
    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError>;
    async fn begin_upload(&self, key: &str) -> Result<Box<dyn Upload>, StoreError>;
    async fn get(&self, key: &str) -> Result<ByteStream, StoreError>;
    /// Every object whose key starts with `prefix`, across all result pages.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError>;
    /// One result page: [`LIST_PAGE`] objects (fewer only at the end) whose key starts with
    /// `prefix` and sorts after `after` (all when none), in key order. What walks an archive of any size uses
    /// ([`pages`]): it holds one page at a time and may jump over a whole folder.
    async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Vec<ObjectInfo>, StoreError>;
    /// Deletes the keys (missing ones are not an error), in batches where the store allows it,
    /// one by one where bulk delete is refused.
    async fn delete_many(&self, keys: &[String]) -> Result<(), StoreError>;
    /// Uploads begun under `prefix` and never completed or aborted (e.g. the agent was killed).
    async fn pending_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, StoreError>;
    async fn abort_pending(&self, upload: &PendingUpload) -> Result<(), StoreError>;
}

/// Objects per [`ObjectStore::list_page`]: S3's and GCS's own largest page.
pub const LIST_PAGE: usize = 1000;

/// Most pages one [`Pager`] follows (ten million objects): a walk ends even against an
/// endpoint that makes up keys forever.
pub const MAX_PAGER_PAGES: usize = 10_000;

/// Lists `prefix` page by page (one page in memory at a time), passing over every key under
/// `prefix` + each of `skip` without listing it (after at most one page of it):
/// `while let Some(page) = pager.next().await? { … }`. Each page must start past the last: a
/// store that ignores the start (and would hand the same page forever) is an error.
pub struct Pager<'a> {
    store: &'a dyn ObjectStore,
    prefix: String,
    skip: Vec<String>,
    after: Option<String>,
    done: bool,
    /// List requests made so far.
    pub requests: usize,
}

impl<'a> Pager<'a> {
    pub fn new(store: &'a dyn ObjectStore, prefix: &str, skip: &[&str]) -> Self {
        Self {
            store,
            prefix: prefix.to_owned(),
            skip: skip.iter().map(|f| format!("{prefix}{f}")).collect(),
            after: None,
            done: false,
            requests: 0,
        }
    }

    /// Starts after `key` instead of at the beginning.
    pub fn after(mut self, key: &str) -> Self {
        self.after = Some(key.to_owned());
        self
    }

    /// Goes on past every key under `folder` (a key prefix), from wherever the walk stood.
    pub fn jump_past(&mut self, folder: &str) {
        self.after = Some(format!("{folder}\u{10FFFF}"));
        self.done = false;
    }

    /// Goes on after `key` if that is further than where the walk stands (a folder whose start
    /// is known already).
    pub fn skip_to(&mut self, key: &str) {
        if self.after.as_deref().is_none_or(|at| at < key) {
            self.after = Some(key.to_owned());
            self.done = false;
        }
    }

    /// The next page of keys not skipped (never empty), or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Vec<ObjectInfo>>, StoreError> {
        while !self.done {
            if self.requests >= MAX_PAGER_PAGES {
                return Err(StoreError::TooLarge {
                    location: self.store.location(),
                    operation: format!("listing {}", self.prefix),
                    limit: format!("{MAX_PAGER_PAGES} result pages"),
                });
            }
            let page = self
                .store
                .list_page(&self.prefix, self.after.as_deref())
                .await?;
            self.requests += 1;
            if let (Some(after), Some(first)) = (&self.after, page.first())
                && first.key.as_str() <= after.as_str()
            {
                return Err(StoreError::Other {
                    location: self.store.location(),
                    operation: format!("listing {} after {after}", self.prefix),
                    source: format!("the page began at {}, not past its start", first.key).into(),
                });
            }
            let Some(last) = page.last().map(|o| o.key.clone()) else {
                self.done = true;
                break;
            };
            let full = page.len() >= LIST_PAGE;
            let skip = &self.skip;
            let kept: Vec<ObjectInfo> = (page.into_iter())
                .filter(|o| !skip.iter().any(|f| o.key.starts_with(f.as_str())))
                .collect();
            let next = jump(&last, skip);
            // A page short of full ends the listing, unless it ended inside a skipped folder.
            self.done = !full && next == last;
            self.after = Some(next);
            if !kept.is_empty() {
                return Ok(Some(kept));
            }
        }
        Ok(None)
    }
}

/// Where a walk goes on after a page ending at `last`: past the whole folder of `folders`
/// that `last` is in, else from `last`. Keys are UTF-8, and every key of a folder sorts before
/// the folder's name followed by the highest character.
fn jump(last: &str, folders: &[String]) -> String {
    match folders.iter().find(|f| last.starts_with(f.as_str())) {
        Some(folder) => format!("{folder}\u{10FFFF}"),
        None => last.to_owned(),
    }
}

/// [`jump`] for a folder named under `prefix`, for tests.
pub fn next_after(prefix: &str, last: &str, skip: &[&str]) -> String {
    let folders: Vec<String> = skip.iter().map(|f| format!("{prefix}{f}")).collect();
    jump(last, &folders)
}

/// Proves that the store refuses a second create-only write of `key` (S3 `If-None-Match: *`,
/// GCS `ifGenerationMatch=0`), then deletes it. Older MinIO releases and some S3-compatible
/// stores ignore the condition and overwrite silently: an archive there could have a segment
/// replaced by a split brain's, so nothing is archived to them.
pub async fn honours_create_only(store: &dyn ObjectStore, key: &str) -> Result<(), StoreError> {
    store
        .put_if_absent(key, Bytes::from_static(b"first"))
        .await?;
    let second = store
        .put_if_absent(key, Bytes::from_static(b"second"))
        .await;
    store.delete_many(&[key.to_owned()]).await?;
    match second {
        Err(e) if e.is_already_exists() => Ok(()),
        Err(e) => Err(e),
        Ok(()) => Err(StoreError::Config(
            format!(
                "{}: a second create-only write of {key} succeeded: the store overwrites \
                 instead of honouring If-None-Match (create-only), so it cannot keep a WAL \
                 archive safe",
                store.location()
            )
            .into(),
        )),
    }
}

/// Reads a whole small object, such as a manifest, of at most [`MAX_SMALL_OBJECT_BYTES`].
pub async fn get_bytes(store: &dyn ObjectStore, key: &str) -> Result<Vec<u8>, StoreError> {
    let stream = store.get(key).await?;
    let operation = format!("read {key}");
    read_capped(
        stream,
        MAX_SMALL_OBJECT_BYTES,
        &store.location(),
        &operation,
    )
    .await
}

/// Collects `stream`, refusing more than `limit` bytes.
pub(crate) async fn read_capped(
    mut stream: ByteStream,
    limit: usize,
    location: &str,
    operation: &str,
) -> Result<Vec<u8>, StoreError> {
    use futures::TryStreamExt;
    let mut out = Vec::new();
    while let Some(chunk) = stream.try_next().await.map_err(|e| StoreError::Other {
        location: location.to_owned(),
        operation: operation.to_owned(),
        source: e.into(),
    })? {
        if out.len() + chunk.len() > limit {
            return Err(StoreError::TooLarge {
                location: location.to_owned(),
                operation: operation.to_owned(),
                limit: format!("{limit} bytes"),
            });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Counts the pages and objects of one listing against [`MAX_LIST_PAGES`] and
/// [`MAX_LIST_OBJECTS`].
pub(crate) struct ListBudget<'a> {
    location: &'a str,
    operation: String,
    pages: usize,
    objects: usize,
}

impl<'a> ListBudget<'a> {
    pub(crate) fn new(location: &'a str, operation: String) -> Self {
        ListBudget {
            location,
            operation,
            pages: 0,
            objects: 0,
        }
    }

    /// Accounts for one more page of `objects` entries.
    pub(crate) fn page(&mut self, objects: usize) -> Result<(), StoreError> {
        self.pages += 1;
        self.objects += objects;
        let exceeded = if self.objects > MAX_LIST_OBJECTS {
            format!("{MAX_LIST_OBJECTS} objects")
        } else if self.pages > MAX_LIST_PAGES {
            format!("{MAX_LIST_PAGES} result pages")
        } else {
            return Ok(());
        };
        Err(StoreError::TooLarge {
            location: self.location.to_owned(),
            operation: self.operation.clone(),
            limit: exceeded,
        })
    }
}

/// Which store to open; what the operator builds from a destination spec.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    S3(s3::S3Config),
    Gcs(gcs::GcsConfig),
}

pub async fn open(config: StoreConfig) -> Result<Box<dyn ObjectStore>, StoreError> {
    Ok(match config {
        StoreConfig::S3(c) => Box::new(s3::S3Store::new(c).await?),
        StoreConfig::Gcs(c) => Box::new(gcs::GcsStore::new(c)?),
    })
}

#[cfg(test)]
#[path = "create_only_tests.rs"]
mod create_only_tests;
