//! The NetworkPolicy of a cluster that asks for one (`spec.networkPolicy`): ingress to its
//! database pods only from what needs it.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{CLUSTER_LABEL, Cluster, Component, POSTGRES_PORT, STATUS_PORT};

/// The label every operator pod carries (the Deployment and the Helm chart set it).
pub const OPERATOR_POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "tusk-operator");

fn selector(labels: impl IntoIterator<Item = (String, String)>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels.into_iter().collect::<BTreeMap<_, _>>()),
        ..LabelSelector::default()
    }
}

fn ports(numbers: &[i32]) -> Option<Vec<NetworkPolicyPort>> {
    let port = |number: &i32| NetworkPolicyPort {
        port: Some(IntOrString::Int(*number)),
        protocol: Some("TCP".to_owned()),
        ..NetworkPolicyPort::default()
    };
    Some(numbers.iter().map(port).collect())
}

/// NetworkPolicy `<name>` on the database pods, with `spec.networkPolicy` only. Three rules:
/// the cluster's own pods and Jobs (replication, clones, the managers' peer queries, backups)
/// reach 5432 and 8000; the clients `spec.networkPolicy` names (by default every pod of the
/// cluster's namespace) reach 5432; the operator's pods in `operator_namespace` reach 8000. A
/// fourth with `metricsNamespaces`: the scrapers it names reach 8000.
pub fn network_policy(cluster: &Cluster, operator_namespace: &str) -> Option<NetworkPolicy> {
    let wanted = cluster.spec.network_policy.as_ref()?;
    let own = NetworkPolicyPeer {
        pod_selector: Some(selector([(
            CLUSTER_LABEL.to_owned(),
            cluster.name.to_owned(),
        )])),
        ..NetworkPolicyPeer::default()
    };
    // The status port only from the database pods themselves, not from every pod of the
    // cluster (its poolers and Jobs need PostgreSQL's port alone).
    let own_database = NetworkPolicyPeer {
        pod_selector: Some(selector(cluster.selector_labels(Component::Database))),
        ..NetworkPolicyPeer::default()
    };
    let clients = NetworkPolicyPeer {
        namespace_selector: wanted.client_namespaces.clone(),
        pod_selector: Some(wanted.client_pods.clone().unwrap_or_default()),
        ..NetworkPolicyPeer::default()
    };
    let operator = NetworkPolicyPeer {
        namespace_selector: Some(selector([(
            "kubernetes.io/metadata.name".to_owned(),
            operator_namespace.to_owned(),
        )])),
        pod_selector: Some(selector([(
            OPERATOR_POD_LABEL.0.to_owned(),
            OPERATOR_POD_LABEL.1.to_owned(),
        )])),
        ..NetworkPolicyPeer::default()
    };
    let scrapers = wanted
        .metrics_namespaces
        .as_ref()
        .map(|namespaces| NetworkPolicyPeer {
            namespace_selector: Some(namespaces.clone()),
            pod_selector: Some(wanted.metrics_pods.clone().unwrap_or_default()),
            ..NetworkPolicyPeer::default()
        });
    let rule = |from, numbers: &[i32]| NetworkPolicyIngressRule {
        from: Some(vec![from]),
        ports: ports(numbers),
    };
    let mut ingress = vec![
        rule(own, &[POSTGRES_PORT]),
        rule(clients, &[POSTGRES_PORT]),
        rule(operator, &[STATUS_PORT]),
        rule(own_database, &[STATUS_PORT]),
    ];
    ingress.extend(scrapers.map(|from| rule(from, &[STATUS_PORT])));
    Some(NetworkPolicy {
        metadata: cluster.child_meta(cluster.name.to_owned(), Component::Database),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(cluster.selector_labels(Component::Database))),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(ingress),
            ..NetworkPolicySpec::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;
    use serde_json::json;

    fn built(spec: &str) -> Option<serde_json::Value> {
        let pg = postgresql(spec);
        let policy = network_policy(&Cluster::new(&pg).unwrap(), "tusk-system");
        policy.map(|p| serde_json::to_value(p.spec).unwrap())
    }

    #[test]
    fn none_unless_asked_for() {
        assert_eq!(built(MINIMAL), None);
    }

    #[test]
    fn by_default_clients_of_the_namespace_reach_postgres_and_the_operator_the_manager() {
        let spec = built("storage: {size: 1Gi}\nnetworkPolicy: {}").unwrap();
        assert_eq!(spec["policyTypes"], json!(["Ingress"]));
        assert_eq!(
            spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
            "database"
        );
        let rules = &spec["ingress"];
        assert_eq!(
            rules[0],
            json!({"from": [{"podSelector": {"matchLabels": {"tusk.dev/cluster": "demo"}}}],
                   "ports": [{"port": 5432, "protocol": "TCP"}]})
        );
        // The status port: the operator, and the database pods (not a pooler or a Job).
        assert_eq!(
            rules[3]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
            "database"
        );
        assert_eq!(
            rules[3]["ports"],
            json!([{"port": 8000, "protocol": "TCP"}])
        );
        // No namespace selector: the cluster's own namespace, every pod of it.
        assert_eq!(
            rules[1],
            json!({"from": [{"podSelector": {}}], "ports": [{"port": 5432, "protocol": "TCP"}]})
        );
        assert_eq!(
            rules[2]["from"][0],
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tusk-system"}},
                   "podSelector": {"matchLabels": {"app.kubernetes.io/name": "tusk-operator"}}})
        );
        assert_eq!(
            rules[2]["ports"],
            json!([{"port": 8000, "protocol": "TCP"}])
        );
        assert_eq!(
            rules.as_array().unwrap().len(),
            4,
            "no scraper unless named"
        );
    }

    #[test]
    fn named_scrapers_reach_the_managers_only() {
        let spec = built(
            "storage: {size: 1Gi}\nnetworkPolicy:\n  metricsNamespaces: {matchLabels: \
             {kubernetes.io/metadata.name: monitoring}}\n  metricsPods: {matchLabels: {app: prometheus}}",
        )
        .unwrap();
        assert_eq!(
            spec["ingress"][4],
            json!({"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                             "podSelector": {"matchLabels": {"app": "prometheus"}}}],
                   "ports": [{"port": 8000, "protocol": "TCP"}]})
        );
    }

    #[test]
    fn named_clients_reach_postgres_only() {
        let spec = built(
            "storage: {size: 1Gi}\nnetworkPolicy:\n  clientNamespaces: {matchLabels: {team: shop}}\n  \
             clientPods: {matchLabels: {app: api}}",
        )
        .unwrap();
        assert_eq!(
            spec["ingress"][1],
            json!({"from": [{"namespaceSelector": {"matchLabels": {"team": "shop"}},
                             "podSelector": {"matchLabels": {"app": "api"}}}],
                   "ports": [{"port": 5432, "protocol": "TCP"}]})
        );
    }
}
