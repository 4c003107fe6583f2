//! The bucket `tusk-backups` seen from the test, through the object-store client the operator
//! and the agent use (its listing follows every result page). The only module that names that
//! crate: when it moves, one `use` changes.

use backup_store::store::ObjectStore;
use backup_store::store::s3::{S3Config, S3Credentials, S3Store};

use crate::{Context, Result};

pub const BUCKET: &str = "tusk-backups";

/// Every key under `prefix` (MinIO's root credentials, as in e2e/local/storage.sh).
pub async fn keys(endpoint: &str, prefix: &str) -> Result<Vec<String>> {
    let store = S3Store::new(S3Config {
        bucket: BUCKET.into(),
        endpoint: Some(endpoint.into()),
        region: "us-east-1".into(),
        force_path_style: true,
        credentials: Some(S3Credentials {
            access_key_id: "minioadmin".into(),
            secret_access_key: "minioadmin".into(),
        }),
        ca_bundle: None,
    })
    .await
    .context(format!("opening s3://{BUCKET} at {endpoint}"))?;
    let objects = store
        .list(prefix)
        .await
        .context(format!("listing s3://{BUCKET}/{prefix}"))?;
    Ok(objects.into_iter().map(|o| o.key).collect())
}
