//! Tusk: a PostgreSQL operator for Kubernetes.
//!
//! The rooms, and which way they depend:
//! - [`crd`]: the API types (and the CRDs generated from them); [`resources`]: pure builders of
//!   every child object. Neither knows a client.
//! - [`runtime`]: what both controllers share — context and watch caches, server-side apply,
//!   backoff, conditions, Events, status writes, Job states, bucket access. It knows neither
//!   controller.
//! - [`clusters`]: the PostgreSQL controller, one visible pipeline: validate → build
//!   ([`clusters::desired`]) → apply ([`clusters::children`], the restore, [`clusters::ha`],
//!   [`clusters::backup_schedule`]) → report ([`clusters::status`], [`clusters::report`]).
//!   `ha` (who is primary) and `backup_schedule` (the cluster's backups) are rooms of their own.
//! - [`backups`]: the Backup controller: backup Jobs followed to Completed or Failed, retention.
//! - [`operator`]: the composition root wiring watches to both controllers; the only module that
//!   knows both.
//!
//! No file imports another that imports it back (`tests/module_graph.rs`). What the operator
//! and the instance managers exchange is the `tusk-contract` crate.

pub mod backups;
pub mod clusters;
pub mod crd;
pub mod crdgen;
pub mod error;
pub mod leader;
pub mod memory;
pub mod metrics;
pub mod operator;
pub mod resources;
pub mod runtime;
pub mod server;
pub mod telemetry;

pub use crd::{Backup, PostgreSQL};
