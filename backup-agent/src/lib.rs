//! Tusk's backup agent as a library: the dump/restore pipelines, the PostgreSQL side and the
//! compression codecs. Buckets, the key layout, manifests and retention are the
//! `tusk-backup-store` crate's (shared with the operator); the `backup-agent` binary is a thin
//! CLI over both.

pub mod compression;
pub mod error;
pub mod pg;
pub mod pipeline;
pub mod termination;

pub use error::{AgentError, exit_code};
