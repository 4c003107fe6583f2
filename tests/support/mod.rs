//! Shared pieces of the mock-API scenarios.

#![allow(dead_code)]

pub mod verifier;
pub mod world;
