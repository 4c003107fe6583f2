//! The PostgreSQL image and what Tusk relies on inside it: the port, where the volume and
//! PGDATA are, and the `postgres` user's uid.

use crate::crd::{PostgreSQLSpec, PostgresVersion};

pub const POSTGRES_PORT: i32 = 5432;
/// The volume is mounted here for every major (18+ images moved their own default)…
pub const DATA_MOUNT: &str = "/var/lib/postgresql";
/// …and PGDATA is a subdirectory, so `lost+found` on a fresh volume never upsets initdb.
pub const PGDATA: &str = "/var/lib/postgresql/data";
/// The `postgres` user of the official Debian-based images.
pub const POSTGRES_UID: i64 = 999;

/// The official image for a major version.
pub fn default_image(version: PostgresVersion) -> String {
    format!("docker.io/library/postgres:{}", version.major())
}

/// The PostgreSQL image a cluster runs: its `spec.image`, or the official one of its major.
pub fn postgres_image(spec: &PostgreSQLSpec) -> String {
    spec.image
        .clone()
        .unwrap_or_else(|| default_image(spec.version))
}

/// Where the init container puts the instance manager, an emptyDir shared with `postgres`.
pub const INSTANCE_MANAGER_DIR: &str = "/tusk/bin";
/// The instance manager's path in the `postgres` container (also PostgreSQL's archive hook).
pub const INSTANCE_MANAGER: &str = "/tusk/bin/tusk-instance";
