//! Shared pieces of the mock-API scenarios.

#![allow(dead_code)]

pub mod backup_run;
pub mod certificates;
pub mod memory_store;
pub mod paths;
pub mod read;
pub mod replicas;
pub mod run;
pub mod scripts;
pub mod verifier;
pub mod world;
