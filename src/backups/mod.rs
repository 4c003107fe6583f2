//! The Backup controller: on-demand backups, records of scheduled runs, retention.
//!
//! Every Backup's name is also its Job's name and its backup id, so a Backup, its Job and its
//! objects in the bucket are found from one another without bookkeeping.

pub mod progress;
pub mod reconcile;
pub mod record;
pub mod retention;
pub mod status;
pub mod summary;

pub use reconcile::{error_policy, reconcile};
