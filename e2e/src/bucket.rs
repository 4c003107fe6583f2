//! The bucket `tusk-backups` seen from the test, through the object-store client the operator
//! and the agent use (its listing follows every result page). The only module that names that
//! crate: when it moves, one `use` changes.

use backup_store::store::s3::{S3Config, S3Credentials, S3Store};
use backup_store::store::{ObjectStore, get_bytes};

use crate::{Context, Result};

pub const BUCKET: &str = "tusk-backups";

/// The bucket through MinIO's root credentials, as in e2e/local/storage.sh.
async fn open(endpoint: &str) -> Result<S3Store> {
    S3Store::new(S3Config {
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
    .context(format!("opening s3://{BUCKET} at {endpoint}"))
}

/// Every key under `prefix`.
pub async fn keys(endpoint: &str, prefix: &str) -> Result<Vec<String>> {
    let objects = open(endpoint)
        .await?
        .list(prefix)
        .await
        .context(format!("listing s3://{BUCKET}/{prefix}"))?;
    Ok(objects.into_iter().map(|o| o.key).collect())
}

/// Flips one bit in the middle of object `key`, as a damaged or tampered object would be.
pub async fn flip_byte(endpoint: &str, key: &str) -> Result {
    let store = open(endpoint).await?;
    let mut bytes = get_bytes(&store, key)
        .await
        .context(format!("reading s3://{BUCKET}/{key}"))?;
    let middle = bytes.len() / 2;
    if let Some(byte) = bytes.get_mut(middle) {
        *byte ^= 0x01;
    }
    store
        .put(key, bytes.into())
        .await
        .context(format!("writing s3://{BUCKET}/{key}"))
}
