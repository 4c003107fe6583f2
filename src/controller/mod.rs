//! The PostgreSQL controller: validate → build → apply → status.

pub mod apply;
pub mod backoff;
pub mod children;
pub mod cleanup;
pub mod conditions;
pub mod context;
pub mod reconcile;
pub mod restore;
pub mod run;
pub mod status;
pub mod validate;

pub use context::{Context, Stores};
pub use reconcile::{error_policy, reconcile, retry_delay};
