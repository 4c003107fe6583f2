//! What the environment tells the suite (the same variables the bash runner read).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::Level;

/// The in-cluster MinIO of e2e/kind (and, through e2e/local/incluster.sh, of the local L4).
pub const IN_CLUSTER_MINIO: &str = "http://minio.minio.svc.cluster.local:9000";

#[derive(Debug, Clone)]
pub struct Settings {
    /// E2E_TIMEOUT: how long each condition is waited for (default 120 s).
    pub timeout: Duration,
    /// E2E_REST_WINDOW: the window in which writes at rest are counted (default 20 s).
    pub rest_window: Duration,
    /// E2E_ARTIFACTS: where diagnostics of failed scenarios go (default: a new temp dir).
    pub artifacts: Option<PathBuf>,
    /// E2E_SUMMARY: a file each scenario appends its result line to (the runner prints it).
    pub summary: Option<PathBuf>,
    /// TUSK_E2E_L4=1: Tusk's pods really run (real PostgreSQL, Jobs run the backup-agent).
    pub l4: bool,
    /// E2E_LEVELS: the levels this run declares (`crate::Level`); none: what the platform
    /// offers. A scenario needing a declared level fails if it cannot use it.
    pub levels: Option<BTreeSet<Level>>,
    /// The S3 endpoint of backup destinations the operator itself reads and empties:
    /// E2E_S3_ENDPOINT, else the local MinIO (TUSK_E2E_MINIO_ENDPOINT), else the in-cluster one.
    pub s3_endpoint: String,
    /// Where the operator and the agents reach GCS (their TUSK_GCS_ENDPOINT) and a GCS scenario
    /// serves its emulator: TUSK_E2E_GCS_ENDPOINT, else what e2e/local/operator.sh chose.
    pub gcs_endpoint: Option<String>,
    /// The repository (samples/, crds/, e2e/local/).
    pub repo: PathBuf,
    /// TUSK_E2E_PG_IMAGE and TUSK_E2E_PG_VERSION: the PostgreSQL the clusters run where the
    /// official image cannot be pulled (the real node's test stand-in). Applied to every
    /// PostgreSQL the suite applies with one of the suite's versions.
    pub postgres: Option<PostgresImage>,
    /// TUSK_E2E_PG_NEXT_IMAGE and TUSK_E2E_PG_NEXT_VERSION: a newer major's stand-in beside
    /// [`Self::postgres`] (the real node's PostgreSQL 17, from another Debian suite), for the
    /// scenarios that run a cluster on a second major. Unset: the official `postgres:17`.
    pub postgres_next: Option<PostgresImage>,
}

/// A PostgreSQL image and its major, replacing the official images of [`SUITE_VERSIONS`].
#[derive(Debug, Clone, PartialEq)]
pub struct PostgresImage {
    pub image: String,
    pub version: String,
    /// TUSK_E2E_POOLER_IMAGE: the PgBouncer image of a `spec.pooler` that names none.
    pub pooler: Option<String>,
}

/// The majors the scenarios and samples are written for (the GCS sample runs 17). Other
/// versions in a manifest are deliberate (an invalid spec) and stay as written.
pub const SUITE_VERSIONS: [&str; 2] = ["17", "18"];

impl Settings {
    pub fn from_env() -> Self {
        let seconds = |name: &str, default: u64| {
            Duration::from_secs(
                std::env::var(name)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(default),
            )
        };
        let path = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let s3_endpoint = std::env::var("E2E_S3_ENDPOINT")
            .ok()
            .or_else(local_minio)
            .unwrap_or_else(|| IN_CLUSTER_MINIO.to_string());
        Settings {
            timeout: seconds("E2E_TIMEOUT", 120),
            rest_window: seconds("E2E_REST_WINDOW", 20),
            artifacts: path("E2E_ARTIFACTS"),
            summary: path("E2E_SUMMARY"),
            l4: std::env::var("TUSK_E2E_L4").is_ok_and(|v| v == "1"),
            levels: std::env::var("E2E_LEVELS")
                .ok()
                .map(|list| Level::parse_list(&list).unwrap_or_else(|e| panic!("{e}"))),
            s3_endpoint,
            gcs_endpoint: local_gcs(),
            repo: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")),
            postgres: PostgresImage::from_env("TUSK_E2E_PG", SUITE_VERSIONS[1]).map(|image| {
                PostgresImage {
                    pooler: non_empty_var("TUSK_E2E_POOLER_IMAGE"),
                    ..image
                }
            }),
            postgres_next: PostgresImage::from_env("TUSK_E2E_PG_NEXT", SUITE_VERSIONS[0]),
        }
    }
}

impl PostgresImage {
    /// `<PREFIX>_IMAGE` and `<PREFIX>_VERSION` (default `version`), when the image is set.
    fn from_env(prefix: &str, version: &str) -> Option<Self> {
        Some(PostgresImage {
            image: non_empty_var(&format!("{prefix}_IMAGE"))?,
            version: std::env::var(format!("{prefix}_VERSION"))
                .unwrap_or_else(|_| version.to_string()),
            pooler: None,
        })
    }
}

fn non_empty_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// The MinIO of e2e/local/l4.sh: TUSK_E2E_MINIO_ENDPOINT, or what storage.sh recorded in the
/// run directory (so that a shell with just `source $TUSK_E2E_DIR/env` finds it too).
pub fn local_minio() -> Option<String> {
    std::env::var("TUSK_E2E_MINIO_ENDPOINT").ok().or_else(|| {
        let dir = std::env::var_os("TUSK_E2E_DIR")?;
        let endpoint = std::fs::read_to_string(PathBuf::from(dir).join("minio/endpoint")).ok()?;
        Some(endpoint.trim().to_string()).filter(|e| !e.is_empty())
    })
}

/// The GCS endpoint of e2e/local: TUSK_E2E_GCS_ENDPOINT, or the one operator.sh recorded in the
/// run directory (the operator process was started with it).
pub fn local_gcs() -> Option<String> {
    std::env::var("TUSK_E2E_GCS_ENDPOINT")
        .ok()
        .or_else(|| {
            let dir = std::env::var_os("TUSK_E2E_DIR")?;
            std::fs::read_to_string(PathBuf::from(dir).join("gcs.endpoint")).ok()
        })
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
}
