//! Data paths: backup (dump → compress → upload), restore (download → verify → apply) and
//! verify-restore (restore into a throwaway server, then check it).

pub mod backup;
mod db_properties;
mod globals_filter;
mod progress;
pub mod restore;
mod restore_marker;
pub mod stream_upload;
pub mod verify;
pub mod verify_restore;

pub use stream_upload::StoredObject;
