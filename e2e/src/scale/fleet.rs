//! The clusters under test: N minimal clusters of the operator under test spread over
//! namespaces, the kwok nodes their pods need, and deleting them all.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::operators::Operator;
use crate::{Context, Result};

/// The field manager of everything the benchmark applies.
const MANAGER: &str = "tusk-scale";
/// Requests in flight while applying: what `kubectl apply` of many files in parallel does.
const IN_FLIGHT: usize = 32;
/// Pods per kwok node (as e2e/local/up.sh's kwok-node-0).
const PODS_PER_NODE: usize = 250;

/// N clusters named `pg-<i>` from i = `first`, cluster i in namespace
/// `scale-<i mod namespaces>`.
#[derive(Debug, Clone, Copy)]
pub struct Fleet {
    pub clusters: usize,
    pub namespaces: usize,
    pub first: usize,
    /// Each cluster with `-rw` as its only client Service (Tusk's `spec.services.disabled: [ro,
    /// r]`): a third of the ClusterIPs.
    pub only_rw: bool,
}

impl Fleet {
    pub fn namespace_names(&self) -> Vec<String> {
        (0..self.namespaces).map(|n| format!("scale-{n}")).collect()
    }

    /// (namespace, name) of every cluster.
    pub fn members(&self) -> Vec<(String, String)> {
        (self.first..self.first + self.clusters)
            .map(|i| (format!("scale-{}", i % self.namespaces), format!("pg-{i}")))
            .collect()
    }

    /// Namespaces, and kwok nodes beyond kwok-node-0 so that every cluster's pod fits (with
    /// room for `more` clusters applied later).
    pub async fn prepare(&self, client: &Client, more: usize) -> Result {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for ns in self.namespace_names() {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            apply(&namespaces, &ns, &body).await?;
        }
        let nodes: Api<Node> = Api::all(client.clone());
        for n in 1..(self.first + self.clusters + more).div_ceil(PODS_PER_NODE) {
            let name = format!("kwok-node-{n}");
            apply(&nodes, &name, &kwok_node(&name)).await?;
        }
        Ok(())
    }

    /// Applies every cluster of `operator`, `IN_FLIGHT` at a time.
    pub async fn apply(&self, client: &Client, operator: Operator) -> Result {
        let resource = operator.resource();
        let resource = &resource;
        futures::stream::iter(self.members())
            .map(|(ns, name)| async move {
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, resource);
                apply(&api, &name, &operator.cluster(&name, self.only_rw)).await
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await
            .map(drop)
    }

    /// Deletes every cluster of `operator` (one collection delete per namespace).
    pub async fn delete(&self, client: &Client, operator: Operator) -> Result {
        for ns in self.namespace_names() {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &ns, &operator.resource());
            api.delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
                .context(format!("deleting the clusters of {ns}"))?;
        }
        Ok(())
    }
}

async fn apply<K>(api: &Api<K>, name: &str, body: &Value) -> Result
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .context(format!("applying {name}"))
    .map(drop)
}

/// A node kwok plays (e2e/local/up.sh's kwok-node-0, another name).
fn kwok_node(name: &str) -> Value {
    let resources = json!({"cpu": "64", "memory": "256Gi", "pods": PODS_PER_NODE.to_string(),
        "ephemeral-storage": "1Ti"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "type": "kwok"}},
        "status": {"allocatable": resources, "capacity": resources},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_spread_round_robin_over_the_namespaces() {
        let fleet = Fleet {
            clusters: 5,
            namespaces: 2,
            first: 0,
            only_rw: false,
        };
        let members = fleet.members();
        assert_eq!(members.len(), 5);
        assert_eq!(members[0], ("scale-0".into(), "pg-0".into()));
        assert_eq!(members[3], ("scale-1".into(), "pg-3".into()));
        assert_eq!(fleet.namespace_names(), ["scale-0", "scale-1"]);
        let backlog = Fleet { first: 5, ..fleet };
        assert_eq!(backlog.members()[0], ("scale-1".into(), "pg-5".into()));
    }
}
