//! The operator's own access to backup buckets: reading manifests, applying retention and
//! deleting a cluster's prefix. Credentials come from the same Secrets the agent pods use.

use async_trait::async_trait;
use backup_store::store::gcs::GcsConfig;
use backup_store::store::s3::{S3Config, S3Credentials as AgentS3Credentials};
use backup_store::{
    CatalogError, ClusterLocation, LayoutError, ObjectStore, StoreConfig, StoreError,
};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use crate::crd::{Destination, SecretKeyRef};

/// Why a bucket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    #[error("Secret {namespace}/{name} (key {key}) for the backup destination: {problem}")]
    Credentials {
        namespace: String,
        name: String,
        key: String,
        problem: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the backup destination names an invalid prefix: {0}")]
    Layout(#[source] LayoutError),
    #[error("spec.backup.destination must set exactly one of s3 or gcs")]
    NoStore,
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

/// Opens the bucket of a destination whose Secrets live in `namespace`. A trait so that mock
/// API scenarios can use an in-memory store.
#[async_trait]
pub trait Buckets: Send + Sync {
    async fn open(
        &self,
        namespace: &str,
        destination: &Destination,
    ) -> Result<Box<dyn ObjectStore>, BucketError>;
}

/// The exact prefix `<path>/<namespace>/<cluster>/` of one cluster in `destination`.
pub fn cluster_location(
    destination: &Destination,
    namespace: &str,
    cluster: &str,
) -> Result<ClusterLocation, BucketError> {
    let path = match (&destination.s3, &destination.gcs) {
        (Some(s3), _) => &s3.path,
        (None, Some(gcs)) => &gcs.path,
        (None, None) => return Err(BucketError::NoStore),
    };
    ClusterLocation::new(path, namespace, cluster).map_err(BucketError::Layout)
}

/// How statuses and messages name a bucket, as the stores themselves do: `s3://bucket` or
/// `gs://bucket`.
pub fn bucket_url(gcs: bool, bucket: &str) -> String {
    let scheme = if gcs { "gs" } else { "s3" };
    format!("{scheme}://{bucket}")
}

/// Real buckets, with credentials read from Secrets through the API.
pub struct SecretBuckets {
    client: Client,
}

impl SecretBuckets {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    async fn secret_value(
        &self,
        namespace: &str,
        key: &SecretKeyRef,
    ) -> Result<String, BucketError> {
        let problem = |problem: String| BucketError::Credentials {
            namespace: namespace.to_owned(),
            name: key.name.clone(),
            key: key.key.clone(),
            problem,
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = api
            .get_opt(&key.name)
            .await
            .map_err(|e| problem(format!("cannot be read: {e}")))?
            .ok_or_else(|| problem("does not exist".to_owned()))?;
        let bytes = secret
            .data
            .and_then(|mut data| data.remove(&key.key))
            .ok_or_else(|| problem("has no such key".to_owned()))?;
        String::from_utf8(bytes.0).map_err(|_| problem("is not UTF-8".to_owned()))
    }
}

#[async_trait]
impl Buckets for SecretBuckets {
    async fn open(
        &self,
        namespace: &str,
        destination: &Destination,
    ) -> Result<Box<dyn ObjectStore>, BucketError> {
        let config = if let Some(s3) = &destination.s3 {
            let credentials = match &s3.credentials {
                Some(c) => Some(AgentS3Credentials {
                    access_key_id: self.secret_value(namespace, &c.access_key_id).await?,
                    secret_access_key: self.secret_value(namespace, &c.secret_access_key).await?,
                }),
                None => None,
            };
            StoreConfig::S3(S3Config {
                bucket: s3.bucket.clone(),
                endpoint: s3.endpoint.clone(),
                region: s3.region.clone(),
                force_path_style: s3.force_path_style,
                credentials,
            })
        } else if let Some(gcs) = &destination.gcs {
            let credentials_json = match &gcs.credentials {
                Some(c) => Some(self.secret_value(namespace, &c.service_account_key).await?),
                None => None,
            };
            StoreConfig::Gcs(GcsConfig {
                bucket: gcs.bucket.clone(),
                // The GCS emulator of the tests; real GCS when unset.
                endpoint: std::env::var("TUSK_GCS_ENDPOINT").ok(),
                credentials_file: None,
                credentials_json,
            })
        } else {
            return Err(BucketError::NoStore);
        };
        Ok(backup_store::store::open(config).await?)
    }
}
