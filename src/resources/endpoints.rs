//! The EndpointSlices of the client Services `-rw`, `-ro` and `-r`, written by the operator
//! (docs/src/design/replication.md, "Client routing by the operator"): the routing follows a
//! handover or a replica's readiness in one write of the reconcile that saw it, instead of
//! waiting for kube-controller-manager's EndpointSlice controller to notice a label (it lagged
//! ~15 s during a burst of new clusters), and the operator, not a label, decides which pods
//! serve — what lets an upgrade's new instances exist before they take over.
//! `clusters::ha::routing` applies them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};

use super::{Cluster, Component, POSTGRES_PORT};

/// `endpointslice.kubernetes.io/managed-by`: tells kube-controller-manager the slice is not its.
pub const MANAGED_BY: &str = "operator.tusk.dev";
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The label selector of the slices Tusk writes (what the operator's watch of them narrows to).
pub const OPERATOR_SLICES: &str = "endpointslice.kubernetes.io/managed-by=operator.tusk.dev";
/// The label that ties a slice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A pod a Service routes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    pub pod: &'a str,
    pub ip: &'a str,
}

/// An instance as the routing sees it: its pod, its IP once it has one, whether it is Ready
/// (and not terminating).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instance<'a> {
    pub pod: &'a str,
    pub ip: Option<&'a str>,
    pub ready: bool,
}

/// Where each client Service routes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes<'a> {
    /// `-rw`: the Lease holder.
    pub primary: Option<Target<'a>>,
    /// `-ro`: every other instance.
    pub replicas: Vec<Target<'a>>,
    /// `-r`: every instance.
    pub any: Vec<Target<'a>>,
}

/// The routes of `instances` (in their order) with `holder` holding the Lease: only a Ready
/// instance with an IP serves — one not Ready is left out, not listed not ready, as kube-proxy
/// routes to neither — and nothing serves while `clients` is false (a restore holds
/// applications back).
pub fn routes<'a>(instances: &[Instance<'a>], holder: Option<&str>, clients: bool) -> Routes<'a> {
    let serving = instances
        .iter()
        .filter(|i| clients && i.ready)
        .filter_map(|i| {
            Some(Target {
                pod: i.pod,
                ip: i.ip?,
            })
        });
    let mut routes = Routes::default();
    for target in serving {
        if Some(target.pod) == holder {
            routes.primary = Some(target);
        } else {
            routes.replicas.push(target);
        }
        routes.any.push(target);
    }
    routes
}

/// The three slices of `routes`: `-rw`, `-ro`, `-r`, each named as its Service.
pub fn client_slices(cluster: &Cluster, routes: &Routes) -> [EndpointSlice; 3] {
    let primary: Vec<Target> = routes.primary.into_iter().collect();
    [
        endpoint_slice(cluster, cluster.rw_service_name(), &primary),
        endpoint_slice(cluster, cluster.ro_service_name(), &routes.replicas),
        endpoint_slice(cluster, cluster.any_service_name(), &routes.any),
    ]
}

/// EndpointSlice `service`, routing to `targets` (none: to nothing).
pub fn endpoint_slice(cluster: &Cluster, service: String, targets: &[Target]) -> EndpointSlice {
    let mut metadata = cluster.child_meta(service.clone(), Component::Database);
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(SERVICE_NAME_LABEL.to_owned(), service);
    labels.insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
    // One family per cluster: the first address says which.
    let address_type = match targets.first() {
        Some(t) if t.ip.contains(':') => "IPv6",
        _ => "IPv4",
    };
    let endpoints = targets
        .iter()
        .map(|t| Endpoint {
            addresses: vec![t.ip.to_owned()],
            conditions: Some(EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false),
            }),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".to_owned()),
                name: Some(t.pod.to_owned()),
                namespace: Some(cluster.namespace.to_owned()),
                ..ObjectReference::default()
            }),
            ..Endpoint::default()
        })
        .collect();
    EndpointSlice {
        metadata,
        address_type: address_type.to_owned(),
        endpoints: Some(endpoints),
        ports: Some(vec![EndpointPort {
            name: Some("postgres".to_owned()),
            port: Some(POSTGRES_PORT),
            protocol: Some("TCP".to_owned()),
            app_protocol: None,
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::{MINIMAL, postgresql};

    const HOLDER: Target = Target {
        pod: "demo-1",
        ip: "10.244.0.5",
    };

    fn instance(pod: &'static str, ip: Option<&'static str>, ready: bool) -> Instance<'static> {
        Instance { pod, ip, ready }
    }

    #[test]
    fn the_slice_routes_to_its_targets_and_names_its_service() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let slice = endpoint_slice(&cluster, cluster.rw_service_name(), &[HOLDER]);
        let labels = slice.metadata.labels.unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "demo-rw");
        assert_eq!(labels[MANAGED_BY_LABEL], MANAGED_BY);
        assert_eq!(slice.metadata.name.as_deref(), Some("demo-rw"));
        assert_eq!(slice.address_type, "IPv4");
        let endpoints = slice.endpoints.unwrap_or_default();
        let [endpoint] = endpoints.as_slice() else {
            panic!("one endpoint: {endpoints:?}")
        };
        assert_eq!(endpoint.addresses, ["10.244.0.5"]);
        let conditions = endpoint.conditions.as_ref().unwrap();
        assert_eq!(conditions.ready, Some(true));
        let target = endpoint.target_ref.as_ref().unwrap();
        assert_eq!(target.name.as_deref(), Some("demo-1"));
        let port = &slice.ports.unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("postgres"), Some(5432))
        );
    }

    fn ips<'a>(targets: &[Target<'a>]) -> Vec<&'a str> {
        targets.iter().map(|t| t.ip).collect()
    }

    #[test]
    fn the_holder_is_rw_the_others_ro_and_every_serving_instance_r() {
        let instances = [
            instance("demo-0", Some("10.0.0.10"), true),
            instance("demo-1", Some("10.0.0.11"), true),
            instance("demo-2", Some("10.0.0.12"), false),
            instance("demo-3", None, true),
        ];
        let routes = routes(&instances, Some("demo-1"), true);
        assert_eq!(routes.primary.map(|t| t.pod), Some("demo-1"));
        assert_eq!(
            ips(&routes.replicas),
            ["10.0.0.10"],
            "not Ready, no IP: out"
        );
        assert_eq!(ips(&routes.any), ["10.0.0.10", "10.0.0.11"]);
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let names = client_slices(&cluster, &routes).map(|s| s.metadata.name.unwrap());
        assert_eq!(names, ["demo-rw", "demo-ro", "demo-r"]);
    }

    #[test]
    fn a_holder_not_ready_or_clients_held_back_routes_nowhere() {
        let ready = [instance("demo-0", Some("10.0.0.10"), true)];
        let unready = [instance("demo-0", Some("10.0.0.10"), false)];
        assert_eq!(routes(&unready, Some("demo-0"), true), Routes::default());
        assert_eq!(routes(&ready, Some("demo-0"), false), Routes::default());
        let no_holder = routes(&ready, None, true);
        assert_eq!(no_holder.primary, None);
        assert_eq!(no_holder.any.len(), 1, "-r serves whatever is Ready");
    }

    /// What the API server checks of a label value (a `/` in one made every list of the
    /// operator's slices a 400, so its caches never filled).
    fn is_label_value(value: &str) -> bool {
        let edge = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
        value.len() <= 63
            && edge(value.chars().next())
            && edge(value.chars().last())
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    }

    #[test]
    fn every_label_value_and_the_watch_selector_are_valid() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let labels = endpoint_slice(&cluster, cluster.any_service_name(), &[HOLDER])
            .metadata
            .labels;
        for (key, value) in labels.unwrap() {
            assert!(is_label_value(&value), "{key}={value}");
        }
        let (key, value) = OPERATOR_SLICES.split_once('=').unwrap();
        assert_eq!((key, value), (MANAGED_BY_LABEL, MANAGED_BY));
        assert!(!is_label_value("tusk.dev/operator"));
    }

    #[test]
    fn an_ipv6_cluster_is_said() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let v6 = Target {
            ip: "fd00::5",
            ..HOLDER
        };
        let slice = endpoint_slice(&cluster, cluster.ro_service_name(), &[v6]);
        assert_eq!(slice.address_type, "IPv6");
    }
}
