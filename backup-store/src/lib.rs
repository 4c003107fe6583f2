//! Tusk's backup buckets, shared by the operator and the backup agent.
//!
//! - [`store`]: the [`ObjectStore`] interface with its S3 (AWS, MinIO) and GCS backends;
//! - [`layout`]: where a cluster's backups live, `<path>/<namespace>/<cluster>/<backupId>/`,
//!   from names checked by [`names`], the rules the operator's CRD applies too;
//! - [`manifest`]: `manifest.json`, whose presence makes a backup exist, naming its owner;
//! - [`claim`]: one writer per backup id; [`ownership`]: whose backups a cluster may delete;
//! - [`catalog`]: listing, resolving and deleting the backups of one cluster; [`prune`]:
//!   retention applied to them; [`live_history`]: which base backups a restore along the
//!   newest timeline can start from;
//! - [`retention`] and [`duration`]: which backups a policy keeps, and its ages (`30d`);
//!   [`recovery_window`]: which base backups and WAL a recovery window keeps ([`lsn`]: WAL
//!   positions);
//! - [`redacted`]: secrets in configurations, never shown by `Debug`;
//! - [`settings`] (feature `clap`): the bucket named by flags or the environment;
//! - [`wal`] (feature `wal`): the WAL archive, for the agent and the instance manager;
//!   [`wal_range`]: the segments a span of WAL needs, and which the archive lacks;
//!   [`continuity`]: whether the archive holds every file from the oldest base backup on
//!   ([`runs`]: the segments it found, as runs);
//!   [`points`]: the restore points a physical backup's verification recovers to;
//!   [`wal_records`]: the newest commit a segment holds (what a time target needs).
//!
//! The dump and restore pipelines are not here: they live in the agent, so the operator does
//! not link PostgreSQL client code. Every TLS connection made here uses rustls with `ring`, the
//! same provider as kube's, so a binary linking both has exactly one.

pub mod catalog;
mod catalog_error;
pub mod claim;
pub mod compression;
pub mod duration;
pub mod layout;
#[cfg(feature = "wal")]
pub mod live_history;
pub mod lsn;
pub mod manifest;
pub mod names;
pub mod ownership;
#[cfg(feature = "wal")]
pub mod prune;

#[cfg(feature = "wal")]
pub mod continuity;
#[cfg(feature = "wal")]
pub mod points;
pub mod recovery_window;
pub mod redacted;
pub mod retention;
#[cfg(feature = "wal")]
pub mod runs;
#[cfg(feature = "clap")]
pub mod settings;
pub mod store;
#[cfg(feature = "wal")]
pub mod wal;
#[cfg(feature = "wal")]
pub mod wal_range;
#[cfg(feature = "wal")]
pub mod wal_records;

pub use catalog::CatalogError;
pub use layout::{ClusterLocation, LayoutError};
pub use manifest::{FileKind, Manifest, ManifestFile};
pub use ownership::Owner;
pub use redacted::Redacted;
pub use store::{ObjectStore, StoreConfig, StoreError};
