//! `spec.replication`: how replicas follow the primary.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Replication settings of a cluster with more than one instance.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Replication {
    /// Synchronous replication: a commit returns only once this many replicas have flushed it.
    /// Without it replication is asynchronous: a failover can lose the last commits the old
    /// primary acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronous: Option<Synchronous>,
}

/// Quorum commit (`synchronous_standby_names = 'ANY n (…every instance…)'`) with required
/// durability: while fewer than `number` replicas stream, commits wait rather than return
/// unprotected, and a failover promotes only when the replicas it heard from must include one
/// holding every acknowledged commit.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Synchronous {
    /// Replicas that must confirm each commit (`ANY number`); fewer than `spec.instances`.
    #[x_kube(validation = kube::core::Rule::new("self >= 1 && self <= 8").message("spec.replication.synchronous.number must be between 1 and 8"))]
    pub number: i32,
}
