//! Tusk's backup agent as a library: object stores, backup layout, manifest, retention and the
//! dump/restore pipelines. The `backup-agent` binary is a thin CLI over this; the operator
//! reuses the store, layout, manifest and catalog modules.

pub mod catalog;
pub mod compression;
pub mod duration;
pub mod error;
pub mod layout;
pub mod manifest;
pub mod pg;
pub mod pipeline;
pub mod retention;
pub mod store;

pub use error::{AgentError, exit_code};
pub use layout::ClusterLocation;
pub use manifest::{FileKind, Manifest, ManifestFile};
pub use store::{ObjectStore, StoreConfig, StoreError};
