//! One object store under test, as env for the agent and as a library handle for assertions.

use backup_store::store::ObjectStore;
use backup_store::store::gcs::{GcsConfig, GcsStore};
use backup_store::store::s3::{S3Config, S3Credentials, S3Store};

use super::fakegcs;
use super::minio;
use super::process::Emulator;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Minio,
    Gcs,
}

enum Server {
    Minio(Emulator),
    Gcs(Emulator),
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
                store
                    .client()
                    .create_bucket()
                    .bucket(BUCKET)
                    .send()
                    .await
                    .expect("create bucket");
                (Server::Minio(minio), Box::new(store))
            }
            Kind::Gcs => {
                let gcs = fakegcs::start().await;
                fakegcs::create_bucket(&gcs, BUCKET).await;
                let store = GcsStore::new(GcsConfig {
                    bucket: BUCKET.into(),
                    endpoint: Some(gcs.endpoint.clone()),
                    ..Default::default()
                })
                .expect("gcs store");
                (Server::Gcs(gcs), Box::new(store))
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
        match &self.server {
            Server::Minio(m) => {
                env.extend([
                    ("TUSK_STORE".into(), "s3".into()),
                    ("TUSK_S3_ENDPOINT".into(), m.endpoint.clone()),
                    ("TUSK_S3_FORCE_PATH_STYLE".into(), "true".into()),
                    ("AWS_ACCESS_KEY_ID".into(), minio::ACCESS_KEY.into()),
                    ("AWS_SECRET_ACCESS_KEY".into(), minio::SECRET_KEY.into()),
                    ("AWS_REGION".into(), "us-east-1".into()),
                    ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
                ]);
            }
            Server::Gcs(g) => {
                env.extend([
                    ("TUSK_STORE".into(), "gcs".into()),
                    ("TUSK_GCS_ENDPOINT".into(), g.endpoint.clone()),
                ]);
            }
        }
        env
    }

    pub fn endpoint(&self) -> &str {
        match &self.server {
            Server::Minio(m) => &m.endpoint,
            Server::Gcs(g) => &g.endpoint,
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
    }
}
