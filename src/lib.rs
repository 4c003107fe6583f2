//! Tusk: a PostgreSQL operator for Kubernetes.
//!
//! The controller turns a `PostgreSQL` custom resource into Secrets, a ConfigMap, Services, a
//! StatefulSet and a readiness-gated backup CronJob, through a visible pipeline:
//! [`controller::validate`] → [`resources`] (pure builders) → [`controller::apply`] →
//! [`controller::status`].

pub mod backups;
pub mod controller;
pub mod crd;
pub mod crdgen;
pub mod error;
pub mod leader;
pub mod metrics;
pub mod resources;
pub mod server;
pub mod storage;
pub mod telemetry;

pub use crd::{Backup, PostgreSQL};
