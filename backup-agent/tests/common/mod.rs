//! Test harness: real PostgreSQL, MinIO and fake-gcs-server on free loopback ports, started and
//! stopped by the tests themselves. Missing binaries fail loudly (never a silent skip).
#![allow(dead_code)]

pub mod agent;
pub mod archive;
pub mod minio;
pub mod postgres;
pub mod seed;
pub mod stores;
pub mod tls;
pub mod verifier;

// Shared with the e2e scenarios (the GCS lifecycle through the operator): one copy, in testkit/.
#[allow(unused_imports)]
pub use tusk_testkit::{
    fakegcs, free_port, gcs_auth, openssl, process, testbin, wait_for_http, wait_until,
};

/// Runs the scenario `async fn $name(kind: Kind)` once per store, as tests `$name::minio` and
/// `$name::gcs`: every store-facing behaviour must hold on both.
#[macro_export]
macro_rules! on_each_store {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread")]
            async fn minio() {
                super::$name($crate::common::stores::Kind::Minio).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn gcs() {
                super::$name($crate::common::stores::Kind::Gcs).await;
            }
        }
    };
}
