//! The PostgreSQL controller: validate → build → apply → status.

pub mod validate;
