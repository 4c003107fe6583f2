//! One object store under test, as env for the agent and as a library handle for assertions.

use backup_store::store::gcs::GcsConfig;
use backup_store::store::s3::{S3Config, S3Credentials, S3Store};
use backup_store::store::{ObjectStore, StoreConfig};

use super::fakegcs;
use super::gcs_auth::Gateway;
use super::minio;
use super::process::Emulator;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Minio,
    Gcs,
}

enum Server {
    Minio(Emulator),
    /// The emulator is reached only through the gateway, which checks the key.
    Gcs(Emulator, Gateway),
}

pub struct TestStore {
    pub kind: Kind,
    pub bucket: String,
    server: Server,
    pub store: Box<dyn ObjectStore>,
}

pub const BUCKET: &str = "tusk-backups";

impl TestStore {
    /// Starts the server and creates [`BUCKET`].
    pub async fn start(kind: Kind) -> TestStore {
        let (server, store): (Server, Box<dyn ObjectStore>) = match kind {
            Kind::Minio => {
                let minio = minio::start().await;
                let store = S3Store::new(s3_config(&minio.endpoint, BUCKET, minio::SECRET_KEY))
                    .await
                    .expect("s3 store");
                minio::create_bucket(&store, BUCKET).await;
                (Server::Minio(minio), Box::new(store))
            }
            Kind::Gcs => {
                let (listener, endpoint) = Gateway::bind().await;
                let gcs = fakegcs::start(&endpoint).await;
                fakegcs::create_bucket(&gcs, BUCKET).await;
                let gateway = Gateway::serve(listener, endpoint, &gcs.endpoint);
                // As the operator opens it: the key JSON read from the destination's Secret.
                let store = backup_store::store::open(StoreConfig::Gcs(GcsConfig {
                    bucket: BUCKET.into(),
                    endpoint: Some(gateway.endpoint.clone()),
                    credentials_file: None,
                    credentials_json: Some(gateway.account.json.clone().into()),
                }))
                .await
                .expect("gcs store");
                (Server::Gcs(gcs, gateway), store)
            }
        };
        TestStore {
            kind,
            bucket: BUCKET.into(),
            server,
            store,
        }
    }

    /// Env vars that point the agent at this store, the way the operator's Job would.
    pub fn agent_env(&self) -> Vec<(String, String)> {
        let mut env = vec![("TUSK_BUCKET".to_string(), self.bucket.clone())];
        // MinIO's variables are the testkit's, shared with the instance manager's tests.
        match &self.server {
            Server::Minio(m) => return tusk_testkit::minio::store_env(m, &self.bucket),
            Server::Gcs(_, gateway) => {
                // As the operator's Job mounts the key: a file named by the standard variable.
                env.extend([
                    ("TUSK_STORE".into(), "gcs".into()),
                    ("TUSK_GCS_ENDPOINT".into(), gateway.endpoint.clone()),
                    (
                        "GOOGLE_APPLICATION_CREDENTIALS".into(),
                        gateway.account.file.display().to_string(),
                    ),
                ]);
            }
        }
        env
    }

    pub fn endpoint(&self) -> &str {
        match &self.server {
            Server::Minio(m) => &m.endpoint,
            Server::Gcs(_, gateway) => &gateway.endpoint,
        }
    }

    /// The credential-checking gateway in front of the GCS emulator.
    pub fn gateway(&self) -> Option<&Gateway> {
        match &self.server {
            Server::Gcs(_, gateway) => Some(gateway),
            Server::Minio(_) => None,
        }
    }

    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .store
            .list(prefix)
            .await
            .expect("list")
            .into_iter()
            .map(|o| o.key)
            .collect();
        keys.sort();
        keys
    }
}

pub fn s3_config(endpoint: &str, bucket: &str, secret: &str) -> S3Config {
    S3Config {
        bucket: bucket.into(),
        endpoint: Some(endpoint.into()),
        region: "us-east-1".into(),
        force_path_style: true,
        credentials: Some(S3Credentials {
            access_key_id: minio::ACCESS_KEY.into(),
            secret_access_key: secret.into(),
        }),
        ca_bundle: None,
    }
}
