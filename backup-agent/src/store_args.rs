//! The bucket a command names on its command line (`--store`, `--bucket`, `--path`, …), opened.

use backup_store::ClusterLocation;
use backup_store::store::{
    self, ObjectStore, StoreConfig, StoreError, gcs::GcsConfig, s3::S3Config,
};

use backup_agent::error::AgentError;

use crate::cli::{StoreArgs, StoreKind};

/// Opens the store and the cluster's location in it.
pub async fn open_store(
    args: &StoreArgs,
) -> Result<(Box<dyn ObjectStore>, ClusterLocation), AgentError> {
    let location = ClusterLocation::new(&args.path, &args.namespace, &args.cluster)?;
    let config = match args.store {
        StoreKind::S3 => {
            only_with_store(&args.gcs_endpoint, "--gcs-endpoint", "gcs")?;
            StoreConfig::S3(S3Config {
                bucket: args.bucket.clone(),
                endpoint: args.s3_endpoint.clone(),
                region: args
                    .s3_region
                    .clone()
                    .or_else(|| std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()))
                    .unwrap_or_else(|| "us-east-1".to_string()),
                force_path_style: args.s3_force_path_style,
                credentials: None,
                ca_bundle: read_ca_bundle(args.s3_ca_bundle.as_deref())?,
            })
        }
        StoreKind::Gcs => {
            only_with_store(&args.s3_endpoint, "--s3-endpoint", "s3")?;
            let bundle = args.s3_ca_bundle.as_ref().map(|p| p.display().to_string());
            only_with_store(&bundle, "--s3-ca-bundle", "s3")?;
            StoreConfig::Gcs(GcsConfig {
                bucket: args.bucket.clone(),
                endpoint: args.gcs_endpoint.clone(),
                credentials_file: std::env::var("GOOGLE_APPLICATION_CREDENTIALS")
                    .ok()
                    .filter(|p| !p.is_empty()),
                credentials_json: None,
            })
        }
    };
    Ok((store::open(config).await?, location))
}

fn read_ca_bundle(path: Option<&std::path::Path>) -> Result<Option<String>, AgentError> {
    let Some(path) = path else { return Ok(None) };
    std::fs::read_to_string(path).map(Some).map_err(|e| {
        AgentError::Store(StoreError::config(
            format!("cannot read the CA bundle {}", path.display()),
            e,
        ))
    })
}

/// An endpoint flag for the other store kind is a usage error rather than silently ignored.
fn only_with_store(flag: &Option<String>, name: &str, store: &str) -> Result<(), AgentError> {
    match flag {
        Some(_) => Err(AgentError::Usage(format!(
            "{name} is only valid with --store {store}"
        ))),
        None => Ok(()),
    }
}
