//! Data paths: backup (dump → compress → upload), restore (download → verify → apply),
//! verify-restore (restore into a throwaway server, then check it), and the physical pair:
//! base-backup (pg_basebackup → compress → upload) and base-restore (download → unpack).

pub mod backup;
pub mod base_backup;
pub mod base_restore;
mod db_properties;
mod globals_filter;
mod inspect;
mod progress;
mod read_ahead;
pub mod restore;
mod restore_marker;
pub mod restore_point;
pub mod stream_upload;
mod tar_scan;
pub mod verify;
pub mod verify_restore;

pub use stream_upload::StoredObject;
