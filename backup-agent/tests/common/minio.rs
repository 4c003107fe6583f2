//! MinIO (started by testkit) and its buckets.

use std::time::Duration;

use super::process::Emulator;

pub use tusk_testkit::minio::{ACCESS_KEY, SECRET_KEY};

pub async fn start() -> Emulator {
    tusk_testkit::minio::start(None).await
}

/// MinIO over https with `tls`'s server certificate (signed by its private CA).
pub async fn start_tls(tls: &super::tls::TestCa) -> Emulator {
    tusk_testkit::minio::start(Some((tls.server_dir(), tls.ca_pem.as_str()))).await
}

/// Creates `bucket`, retrying while MinIO answers 503 `XMinioServerNotInitialized`: its ready
/// endpoint can answer before the object layer takes requests.
pub async fn create_bucket(store: &backup_store::store::s3::S3Store, bucket: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match store.client().create_bucket().bucket(bucket).send().await {
            Ok(_) => return,
            Err(e) => {
                let starting = format!("{e:?}").contains("XMinioServerNotInitialized");
                assert!(
                    starting && std::time::Instant::now() < deadline,
                    "create bucket {bucket}: {e:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
