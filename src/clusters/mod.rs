//! The PostgreSQL controller: validate → build (`desired`) → apply (`children`, `primary`,
//! `restore`, `scheduled_runs`) → status (`status`, written by `report`); `election` decides
//! failovers; `cleanup` carries out the finalizer on deletion.

pub mod backup_summary;
pub mod children;
pub mod cleanup;
pub mod desired;
pub mod election;
pub mod freshness;
mod handover_record;
pub mod primary;
mod primary_events;
pub mod readiness;
pub mod reconcile;
pub mod report;
pub mod restore;
mod rollout;
pub mod rollout_plan;
pub mod scheduled_runs;
pub mod status;
pub mod storage;
pub mod switchover;
pub mod switchover_plan;
pub mod validate;
pub mod verification;
mod verify_step;

pub use reconcile::{error_policy, reconcile, retry_delay};
