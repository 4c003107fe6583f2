//! The PostgreSQL controller. `reconcile` orders the phases; each has its room:
//!
//! - the pipeline, in order: `validate` → `desired` (build, pure) → `children` (apply, with
//!   `credentials` for the Secrets and `storage` for claim growth) → `restore` → `status` (computed, pure) → `report` (the status
//!   written, and every Event of a reconcile); `readiness` is the fact Ready derives from;
//!   `cleanup` carries out the finalizer on deletion.
//! - [`ha`]: who is primary — the Lease, failover, switchover, rolling restarts, role labels.
//!   It imports nothing else from this room.
//! - [`backup_schedule`]: the cluster's backups — scheduled runs recorded as Backups, their
//!   summary in the status, freshness, and the schedule of verifications.
//! - the queues: the main controller's; [`primary_lane`], for clusters whose primary needs
//!   looking at now; [`creation_lane`], for clusters whose children are still to be created.
//!   All three run the same reconcile and take turns on a cluster.
//!
//! Dependencies go one way: `reconcile` → the phases → `ha` / `backup_schedule` → `runtime`,
//! `resources`, `crd`.

pub mod archiving;
pub mod backup_schedule;
pub mod children;
pub mod cleanup;
pub mod commit_clock;
pub mod creation_lane;
pub mod credentials;
pub mod declared;
pub mod declared_passwords;
pub mod desired;
pub mod ha;
pub mod packed_apply;
pub mod pooler;
pub mod primary_lane;
pub mod readiness;
pub mod reconcile;
pub mod report;
pub mod restore;
pub mod restore_base;
pub mod restore_certificate;
pub mod restore_window;
pub mod status;
pub mod storage;
pub mod upgrade;
pub mod validate;

pub use reconcile::{error_policy, reconcile, retry_delay};
