//! `spec.services`: which of the client Services a cluster has.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A client Service that may be left out. `-rw` (the primary) cannot: it is how every client,
/// the pooler and the backups reach the database.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub enum ClientService {
    /// `<name>-ro`: the replicas.
    #[serde(rename = "ro")]
    ReadOnly,
    /// `<name>-r`: every ready instance.
    #[serde(rename = "r")]
    Any,
}

/// The client Services of a cluster: `<name>-rw` always, `<name>-ro` and `<name>-r` unless
/// disabled. Each takes a ClusterIP, an address of the Service range and the API server's
/// slowest write (docs/src/cluster/connect.md#only-the-services-you-use).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicesSpec {
    /// Client Services not to create: `ro`, `r`. Disabling one on a running cluster deletes the
    /// Service (a client dialing it then fails to resolve the name); removing it from the list
    /// creates it again, with a new ClusterIP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub disabled: Vec<ClientService>,
}

impl ServicesSpec {
    /// Whether the cluster has `service`.
    pub fn enabled(&self, service: ClientService) -> bool {
        !self.disabled.contains(&service)
    }
}
