//! `spec.networkPolicy`: who may reach a cluster's pods.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Admit only the traffic the cluster needs, with a NetworkPolicy `<name>` on its database pods:
/// PostgreSQL (5432) from the cluster's own pods and Jobs and from the clients named here; the
/// instance manager (8000) from the cluster's own pods, the operator's and the scrapers named
/// here. Every other ingress
/// is refused where the network plugin enforces NetworkPolicies. Kubelet probes come from the
/// node, which the common plugins (Calico, Cilium) always admit.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Namespaces whose pods may connect to PostgreSQL, by label (`{}`: every namespace). Unset:
    /// the cluster's own namespace only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_namespaces: Option<LabelSelector>,
    /// Which pods of those namespaces may connect, by label. Unset: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_pods: Option<LabelSelector>,
    /// Namespaces whose pods may scrape the instance managers' metrics (port 8000, with the
    /// token of Secret `<name>-monitoring`), by label: where Prometheus runs. Unset: no scraper
    /// is admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_namespaces: Option<LabelSelector>,
    /// Which pods of those namespaces may scrape, by label (such as
    /// `app.kubernetes.io/name: prometheus`). Unset: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_pods: Option<LabelSelector>,
}
