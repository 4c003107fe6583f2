//! The `-rw` Service's EndpointSlice, written by the operator from the Lease (the plan in
//! docs/src/design/replication.md, "`-rw` routed by the operator"): the routing then follows a
//! handover in one write from the primary lane, instead of waiting for kube-controller-manager's
//! EndpointSlice controller to notice a label (it lagged ~15 s during a burst of new clusters).
//! `clusters::ha::routing` applies it.

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

/// The pod `-rw` routes to: the Lease holder, once it has an IP and is Ready (a pod not Ready
/// is left out, not listed not ready: kube-proxy routes to neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Primary<'a> {
    pub pod: &'a str,
    pub ip: &'a str,
}

/// EndpointSlice `<name>-rw`: the holder's address, or none (no holder yet, or `clients` false
/// while a restore holds applications back).
pub fn rw_endpoints(cluster: &Cluster, primary: Option<Primary>, clients: bool) -> EndpointSlice {
    let service = cluster.rw_service_name();
    let mut metadata = cluster.child_meta(service.clone(), Component::Database);
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(SERVICE_NAME_LABEL.to_owned(), service);
    labels.insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
    let primary = primary.filter(|_| clients);
    let address_type = match primary {
        Some(p) if p.ip.contains(':') => "IPv6",
        _ => "IPv4",
    };
    let endpoints = primary
        .map(|p| Endpoint {
            addresses: vec![p.ip.to_owned()],
            conditions: Some(EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false),
            }),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".to_owned()),
                name: Some(p.pod.to_owned()),
                namespace: Some(cluster.namespace.to_owned()),
                ..ObjectReference::default()
            }),
            ..Endpoint::default()
        })
        .into_iter()
        .collect::<Vec<_>>();
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

    const HOLDER: Primary = Primary {
        pod: "demo-1",
        ip: "10.244.0.5",
    };

    #[test]
    fn the_slice_routes_to_the_holder_alone_and_names_its_service() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let slice = rw_endpoints(&cluster, Some(HOLDER), true);
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
        let labels = rw_endpoints(&cluster, Some(HOLDER), true).metadata.labels;
        for (key, value) in labels.unwrap() {
            assert!(is_label_value(&value), "{key}={value}");
        }
        let (key, value) = OPERATOR_SLICES.split_once('=').unwrap();
        assert_eq!((key, value), (MANAGED_BY_LABEL, MANAGED_BY));
        assert!(!is_label_value("tusk.dev/operator"));
    }

    #[test]
    fn no_holder_or_clients_held_back_leaves_no_endpoint() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        assert!(
            rw_endpoints(&cluster, None, true)
                .endpoints
                .unwrap_or_default()
                .is_empty()
        );
        assert!(
            rw_endpoints(&cluster, Some(HOLDER), false)
                .endpoints
                .unwrap_or_default()
                .is_empty()
        );
    }

    #[test]
    fn an_ipv6_holder_is_said() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let primary = Primary {
            ip: "fd00::5",
            ..HOLDER
        };
        let slice = rw_endpoints(&cluster, Some(primary), true);
        assert_eq!(slice.address_type, "IPv6");
    }
}
