//! The operator's own access to backup buckets: reading manifests, applying retention and
//! deleting a cluster's prefix. Credentials come from the same Secrets the agent pods use.
//! Endpoints are user-chosen, so every bucket call has a deadline ([`Bounded`]).

use std::time::Duration;

use async_trait::async_trait;
use backup_store::store::Bounded;
use backup_store::store::gcs::GcsConfig;
use backup_store::store::s3::{S3Config, S3Credentials as AgentS3Credentials};
use backup_store::{
    CatalogError, ClusterLocation, LayoutError, ObjectStore, Owner, StoreConfig, StoreError,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};

use crate::crd::{CaBundle, Destination, PostgreSQL, SecretKeyRef};

/// Why a bucket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    /// A Secret (credentials, CA bundle) or ConfigMap (CA bundle) the destination names.
    #[error("{kind} {namespace}/{name} (key {key}) for the backup destination: {problem}")]
    Credentials {
        kind: &'static str,
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
    #[error("s3.caBundle must set exactly one of secretKeyRef or configMapKeyRef")]
    NoCaSource,
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// Reading the WAL archive (a restore's walk to the end of the archive).
    #[error("reading the WAL archive: {0}")]
    Wal(#[source] backup_store::wal::WalError),
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

/// On whose behalf `pg` deletes backups at `location` in the bucket `bucket_url` (as the store
/// names it, e.g. `s3://backups`): its own uid, never the backup its `status.restoredFrom` names
/// when that one lies under this prefix (a re-created cluster restored from its predecessor's).
pub fn owner(pg: &PostgreSQL, bucket_url: &str, location: &ClusterLocation) -> Owner {
    let uid = pg.metadata.uid.as_deref();
    let restored = pg.status.as_ref().and_then(|s| s.restored_from.as_ref());
    match restored {
        // restoredFrom.location is `<bucket>/<prefix><backupId>/`, built the same way.
        Some(from)
            if from.location
                == format!("{bucket_url}/{}", location.backup_prefix(&from.backup_id)) =>
        {
            Owner::new(uid).protecting(from.backup_id.clone())
        }
        _ => Owner::new(uid),
    }
}

/// How statuses and messages name a bucket, as the stores themselves do: `s3://bucket` or
/// `gs://bucket`.
pub fn bucket_url(gcs: bool, bucket: &str) -> String {
    let scheme = if gcs { "gs" } else { "s3" };
    format!("{scheme}://{bucket}")
}

/// The default deadline of one bucket call made by the operator.
pub const DEFAULT_BUCKET_TIMEOUT: Duration = Duration::from_secs(30);

/// Real buckets, with credentials read from Secrets through the API.
pub struct SecretBuckets {
    client: Client,
    /// The deadline of each bucket call (and of opening the store).
    timeout: Duration,
}

impl SecretBuckets {
    pub fn new(client: Client, timeout: Duration) -> Self {
        Self { client, timeout }
    }

    async fn secret_value(
        &self,
        namespace: &str,
        key: &SecretKeyRef,
    ) -> Result<String, BucketError> {
        self.key_value::<Secret>(namespace, key, |secret, k| {
            let bytes = secret.data.and_then(|mut data| data.remove(k))?;
            Some(String::from_utf8(bytes.0).map_err(|_| "is not UTF-8".to_owned()))
        })
        .await
    }

    /// The PEM bundle named by `bundle` (CEL admits exactly one source).
    async fn ca_bundle(&self, namespace: &str, bundle: &CaBundle) -> Result<String, BucketError> {
        if let Some(key) = &bundle.secret_key_ref {
            return self.secret_value(namespace, key).await;
        }
        let key = bundle
            .config_map_key_ref
            .as_ref()
            .ok_or(BucketError::NoCaSource)?;
        self.key_value::<ConfigMap>(namespace, key, |map, k| {
            map.data.and_then(|mut data| data.remove(k)).map(Ok)
        })
        .await
    }

    /// The value of `key` in the object of kind `K` it names; `value` returns `None` for a
    /// missing key and an error for an unusable value.
    async fn key_value<K>(
        &self,
        namespace: &str,
        key: &SecretKeyRef,
        value: impl FnOnce(K, &str) -> Option<Result<String, String>>,
    ) -> Result<String, BucketError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + k8s_openapi::Resource
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let problem = |problem: String| BucketError::Credentials {
            kind: <K as k8s_openapi::Resource>::KIND,
            namespace: namespace.to_owned(),
            name: key.name.clone(),
            key: key.key.clone(),
            problem,
        };
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        let object = api
            .get_opt(&key.name)
            .await
            .map_err(|e| problem(format!("cannot be read: {e}")))?
            .ok_or_else(|| problem("does not exist".to_owned()))?;
        value(object, &key.key)
            .ok_or_else(|| problem("has no such key".to_owned()))?
            .map_err(problem)
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
                    secret_access_key: self
                        .secret_value(namespace, &c.secret_access_key)
                        .await?
                        .into(),
                }),
                None => None,
            };
            let ca_bundle = match &s3.ca_bundle {
                Some(bundle) => Some(self.ca_bundle(namespace, bundle).await?),
                None => None,
            };
            StoreConfig::S3(S3Config {
                bucket: s3.bucket.clone(),
                endpoint: s3.endpoint.clone(),
                region: s3.region.clone(),
                force_path_style: s3.force_path_style,
                credentials,
                ca_bundle,
            })
        } else if let Some(gcs) = &destination.gcs {
            let credentials_json = match &gcs.credentials {
                Some(c) => Some(
                    self.secret_value(namespace, &c.service_account_key)
                        .await?
                        .into(),
                ),
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
        let location = match &config {
            StoreConfig::S3(c) => bucket_url(false, &c.bucket),
            StoreConfig::Gcs(c) => bucket_url(true, &c.bucket),
        };
        let store = tokio::time::timeout(self.timeout, backup_store::store::open(config))
            .await
            .map_err(|_| StoreError::TimedOut {
                location,
                operation: "opening the store".to_owned(),
                after: self.timeout,
            })??;
        Ok(Box::new(Bounded::new(store, self.timeout)))
    }
}
