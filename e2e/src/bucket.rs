//! The bucket `tusk-backups` seen from the test, through the object-store client the operator
//! and the agent use (its listing follows every result page). The only module that names that
//! crate: when it moves, one `use` changes.

use backup_store::Manifest;
use backup_store::store::s3::{S3Config, S3Credentials, S3Store};
use backup_store::store::{ObjectStore, get_bytes};

use crate::{Context, Result, fail};

pub const BUCKET: &str = "tusk-backups";
/// How the name of database `app`'s dump in a backup starts (the extension says the compression).
pub const APP_DUMP: &str = "db-app.";
pub const MANIFEST: &str = "manifest.json";

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

/// How a test damages one object of a backup, as a fault or a careless hand in the bucket would.
#[derive(Debug, Clone, Copy)]
pub enum Damage<'a> {
    /// One bit in the middle of the object flips: it no longer matches its sha256.
    FlipBit,
    /// The object is deleted, the manifest still lists it.
    Delete,
    /// (A manifest) the row count recorded for `table` is raised by one; every file's checksum
    /// stays valid, so only a count comparison after a restore can notice.
    Miscount { table: &'a str },
}

/// Applies `damage` to object `key`.
pub async fn damage(endpoint: &str, key: &str, damage: Damage<'_>) -> Result {
    let store = open(endpoint).await?;
    let read = || async {
        get_bytes(&store, key)
            .await
            .context(format!("reading s3://{BUCKET}/{key}"))
    };
    let bytes = match damage {
        Damage::Delete => {
            return store
                .delete_many(&[key.to_string()])
                .await
                .context(format!("deleting s3://{BUCKET}/{key}"));
        }
        Damage::FlipBit => {
            let mut bytes = read().await?;
            let middle = bytes.len() / 2;
            if let Some(byte) = bytes.get_mut(middle) {
                *byte ^= 0x01;
            }
            bytes
        }
        Damage::Miscount { table } => miscount(&read().await?, key, table)?,
    };
    store
        .put(key, bytes.into())
        .await
        .context(format!("writing s3://{BUCKET}/{key}"))
}

/// Manifest `bytes` with one more row recorded for `table`.
fn miscount(bytes: &[u8], key: &str, table: &str) -> Result<Vec<u8>> {
    let mut manifest = Manifest::from_json(bytes).context(format!("parsing {key}"))?;
    let Some(count) = manifest
        .files
        .iter_mut()
        .filter_map(|f| f.tables.as_mut())
        .flatten()
        .find(|t| t.name == table)
    else {
        fail!("{key} records no row count for table {table}");
    };
    count.rows += 1;
    manifest.to_json().context(format!("serialising {key}"))
}
