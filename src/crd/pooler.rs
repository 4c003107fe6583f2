//! `spec.pooler`: a PgBouncer Deployment in front of the primary that follows the primary Lease
//! and pauses through a planned switchover (docs/src/cluster/pooler.md).

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How PgBouncer hands server connections to clients.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoolMode {
    /// A server connection per transaction: the mode that hides switchovers (a paused client
    /// waits between transactions, never inside one). Session state (SET, prepared statements
    /// by name, advisory locks, temporary tables) does not outlive a transaction.
    #[default]
    Transaction,
    /// A server connection for the whole client session: everything PostgreSQL offers works,
    /// but a switchover ends the session (its server is the old primary).
    Session,
}

impl PoolMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transaction => "transaction",
            Self::Session => "session",
        }
    }
}

/// A PgBouncer pooler, Deployment `<name>-pooler` behind Service `<name>-pooler-rw`.
/// Applications connect to it with the same roles, passwords and database names as to
/// `<name>-rw`, over TLS verified against the cluster's CA, and authenticate with SCRAM.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PoolerSpec {
    /// How many PgBouncer pods, spread over nodes.
    #[serde(default = "default_instances")]
    #[x_kube(validation = kube::core::Rule::new("self >= 1 && self <= 16").message("spec.pooler.instances must be between 1 and 16"))]
    pub instances: i32,
    /// `transaction` (default) or `session`.
    #[serde(default)]
    pub pool_mode: PoolMode,
    /// Server connections per database and role, per pooler pod.
    #[serde(default = "default_pool_size")]
    #[x_kube(validation = kube::core::Rule::new("self >= 1 && self <= 1000").message("spec.pooler.defaultPoolSize must be between 1 and 1000"))]
    pub default_pool_size: i32,
    /// Client connections each pooler pod accepts.
    #[serde(default = "default_max_clients")]
    #[x_kube(validation = kube::core::Rule::new("self >= 1 && self <= 100000").message("spec.pooler.maxClientConnections must be between 1 and 100000"))]
    pub max_client_connections: i32,
    /// The PgBouncer image: Debian-based, with `pgbouncer` on its PATH (Tusk's instance
    /// manager, copied in from the agent image, runs it). Unset: the operator's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self.matches('^[^\\\\s]+$')").message("spec.pooler.image must be an image reference without whitespace"))]
    pub image: Option<String>,
    /// Also a read-only pooler, Deployment and Service `<name>-pooler-ro`, with the same
    /// settings, in front of the replicas (through `<name>-ro`): its clients read from a
    /// replica, balanced per server connection. No pause: moving the primary moves no route of
    /// it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

impl Default for PoolerSpec {
    fn default() -> Self {
        Self {
            instances: default_instances(),
            pool_mode: PoolMode::default(),
            default_pool_size: default_pool_size(),
            max_client_connections: default_max_clients(),
            image: None,
            read_only: false,
        }
    }
}

fn default_instances() -> i32 {
    2
}

fn default_pool_size() -> i32 {
    20
}

fn default_max_clients() -> i32 {
    1000
}
