//! The Backup controller: on-demand backups and the records of scheduled runs followed to
//! Completed or Failed, then retention, and verifications of Completed Backups.
//!
//! Every Backup's name is also its Job's name and its backup id, so a Backup, its Job and its
//! objects in the bucket are found from one another without bookkeeping.

pub mod progress;
pub mod reconcile;
pub mod retention;
pub mod status;
pub mod verification;
mod verify;

pub use reconcile::{error_policy, reconcile};
