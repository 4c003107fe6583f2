//! Data paths: backup (dump → compress → upload) and restore (download → verify → apply).

pub mod backup;
mod db_properties;
mod globals_filter;
mod progress;
pub mod restore;
mod restore_marker;
pub mod stream_upload;
pub mod verify;

pub use stream_upload::StoredObject;
