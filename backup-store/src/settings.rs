//! Which bucket to open, from flags or the environment (`TUSK_STORE`, `TUSK_BUCKET`, …): one
//! definition for the agent's commands and the instance manager's archiver, which the operator
//! configures with the same variables (`src/resources/agent.rs`, `store_environment`).

use clap::{Args, Parser, ValueEnum};

use crate::layout::{ClusterLocation, LayoutError};
use crate::redacted::Redacted;
use crate::store::{self, ObjectStore, StoreConfig, StoreError, gcs::GcsConfig, s3::S3Config};

/// A GCS service-account key given as its JSON (the instance manager's), where
/// `GOOGLE_APPLICATION_CREDENTIALS` names a file (the Jobs').
pub const GCS_KEY_JSON_ENV: &str = "TUSK_GCS_KEY_JSON";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    S3,
    Gcs,
}

/// The bucket and how to reach it; the credentials come from the SDKs' own chains
/// (`AWS_ACCESS_KEY_ID`…, `GOOGLE_APPLICATION_CREDENTIALS`), never from a flag.
#[derive(Debug, Clone, Args)]
pub struct StoreFlags {
    /// Object store type.
    #[arg(long, env = "TUSK_STORE", value_enum)]
    pub store: StoreKind,
    /// Bucket name (must exist).
    #[arg(long, env = "TUSK_BUCKET")]
    pub bucket: String,
    /// Prefix inside the bucket (may be empty).
    #[arg(long, env = "TUSK_PATH", default_value = "")]
    pub path: String,
    /// S3 endpoint URL for S3-compatible stores such as MinIO.
    #[arg(long, env = "TUSK_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 region [default: $AWS_REGION, else us-east-1].
    #[arg(long, env = "TUSK_S3_REGION")]
    pub s3_region: Option<String>,
    /// Path-style S3 URLs (MinIO and most S3-compatibles need this).
    #[arg(long, env = "TUSK_S3_FORCE_PATH_STYLE", num_args = 0..=1, default_value = "false",
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub s3_force_path_style: bool,
    /// PEM file of a private CA that signed the S3 endpoint's certificate (trusted in addition
    /// to the public roots).
    #[arg(long, env = "TUSK_S3_CA_BUNDLE")]
    pub s3_ca_bundle: Option<std::path::PathBuf>,
    /// GCS JSON API endpoint, for the emulator (e.g. http://127.0.0.1:4443).
    #[arg(long, env = "TUSK_GCS_ENDPOINT")]
    pub gcs_endpoint: Option<String>,
}

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Flags that contradict each other: the caller's mistake, not the store's.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StoreFlags {
    /// From the environment alone, or `None` when it names no store (`TUSK_STORE` unset).
    pub fn from_env() -> Result<Option<Self>, OpenError> {
        if std::env::var_os("TUSK_STORE").is_none() {
            return Ok(None);
        }
        /// The flags as a command of their own: clap reads each one's variable.
        #[derive(Parser)]
        struct FromEnv {
            #[command(flatten)]
            flags: StoreFlags,
        }
        FromEnv::try_parse_from(["store"])
            .map(|parsed| Some(parsed.flags))
            .map_err(|e| OpenError::Usage(e.render().to_string()))
    }

    /// The flags as the variables [`Self::from_env`] reads: for a child process (a restore
    /// command) that must open the same bucket. Credentials are not among them: the child
    /// inherits the SDKs' own.
    pub fn to_env(&self) -> Vec<(String, String)> {
        let store = match self.store {
            StoreKind::S3 => "s3",
            StoreKind::Gcs => "gcs",
        };
        let mut env = vec![
            ("TUSK_STORE", store.to_owned()),
            ("TUSK_BUCKET", self.bucket.clone()),
            ("TUSK_PATH", self.path.clone()),
            (
                "TUSK_S3_FORCE_PATH_STYLE",
                self.s3_force_path_style.to_string(),
            ),
        ];
        let optional = [
            ("TUSK_S3_ENDPOINT", self.s3_endpoint.clone()),
            ("TUSK_S3_REGION", self.s3_region.clone()),
            (
                "TUSK_S3_CA_BUNDLE",
                (self.s3_ca_bundle.as_ref()).map(|p| p.display().to_string()),
            ),
            ("TUSK_GCS_ENDPOINT", self.gcs_endpoint.clone()),
        ];
        env.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
        env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    /// Opens the store and the location of `namespace`/`cluster` in it.
    pub async fn open(
        &self,
        namespace: &str,
        cluster: &str,
    ) -> Result<(Box<dyn ObjectStore>, ClusterLocation), OpenError> {
        let location = ClusterLocation::new(&self.path, namespace, cluster)?;
        let config = match self.store {
            StoreKind::S3 => {
                only_with_store(&self.gcs_endpoint, "--gcs-endpoint", "gcs")?;
                StoreConfig::S3(S3Config {
                    bucket: self.bucket.clone(),
                    endpoint: self.s3_endpoint.clone(),
                    region: self
                        .s3_region
                        .clone()
                        .or_else(|| std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()))
                        .unwrap_or_else(|| "us-east-1".to_string()),
                    force_path_style: self.s3_force_path_style,
                    credentials: None,
                    ca_bundle: read_ca_bundle(self.s3_ca_bundle.as_deref())?,
                })
            }
            StoreKind::Gcs => {
                only_with_store(&self.s3_endpoint, "--s3-endpoint", "s3")?;
                let bundle = self.s3_ca_bundle.as_ref().map(|p| p.display().to_string());
                only_with_store(&bundle, "--s3-ca-bundle", "s3")?;
                StoreConfig::Gcs(GcsConfig {
                    bucket: self.bucket.clone(),
                    endpoint: self.gcs_endpoint.clone(),
                    credentials_file: std::env::var("GOOGLE_APPLICATION_CREDENTIALS")
                        .ok()
                        .filter(|p| !p.is_empty()),
                    // The instance manager's: the key in its environment, never in a file a
                    // database process could read (issue 47).
                    credentials_json: std::env::var(GCS_KEY_JSON_ENV)
                        .ok()
                        .filter(|k| !k.is_empty())
                        .map(Redacted::from),
                })
            }
        };
        Ok((store::open(config).await?, location))
    }
}

fn read_ca_bundle(path: Option<&std::path::Path>) -> Result<Option<String>, StoreError> {
    let Some(path) = path else { return Ok(None) };
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(|e| StoreError::config(format!("cannot read the CA bundle {}", path.display()), e))
}

/// An endpoint flag for the other store kind is a usage error rather than silently ignored.
fn only_with_store(flag: &Option<String>, name: &str, store: &str) -> Result<(), OpenError> {
    match flag {
        Some(_) => Err(OpenError::Usage(format!(
            "{name} is only valid with --store {store}"
        ))),
        None => Ok(()),
    }
}
