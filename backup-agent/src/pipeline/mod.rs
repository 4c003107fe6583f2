//! Data paths: backup (dump → compress → upload) and restore (download → verify → apply).

pub mod backup;
mod globals_filter;
mod progress;
pub mod restore;
pub mod stream_upload;
pub mod verify;

pub use stream_upload::StoredObject;
