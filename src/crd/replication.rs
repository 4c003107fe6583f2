//! `spec.replication`: how replicas follow the primary.

use kube::KubeSchema;
use schemars::JsonSchema;
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

/// Quorum commit: `synchronous_standby_names = 'ANY n (…every other instance…)'`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Synchronous {
    /// Replicas that must confirm each commit (`ANY number`); fewer than `spec.instances`.
    #[x_kube(validation = kube::core::Rule::new("self >= 1 && self <= 8").message("spec.replication.synchronous.number must be between 1 and 8"))]
    pub number: i32,

    /// What happens while fewer than `number` replicas stream. `required` (default): commits
    /// wait rather than return unprotected, and a failover promotes only when the replicas it
    /// heard from must include one holding every acknowledged commit. `preferred`: commits wait
    /// only for the replicas that stream (none when none do), so writes never block on a
    /// missing replica, and a failover promotes the most advanced answering replica as with
    /// asynchronous replication: commits acknowledged while degraded can be lost.
    #[serde(default)]
    pub durability: Durability,
}

/// Durability of synchronous replication while replicas are missing.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Commits wait for `number` replicas, even while fewer stream; no acknowledged commit is
    /// lost in a failover.
    #[default]
    Required,
    /// Commits wait for as many streaming replicas as there are, up to `number`; commits
    /// acknowledged while degraded can be lost in a failover.
    Preferred,
}

impl Synchronous {
    /// Whether a failover must respect the quorum: only `required` promises that `number`
    /// replicas hold every acknowledged commit.
    pub fn is_required(&self) -> bool {
        self.durability == Durability::Required
    }
}
