//! The Services clients use — `-rw` (the primary), `-ro` (the replicas), `-r` (any instance) —
//! and the headless Service that gives the StatefulSet's pods their stable DNS names.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Cluster, Component, POSTGRES_PORT, ROLE_LABEL, ROLE_REPLICA};

fn postgres_port() -> ServicePort {
    ServicePort {
        name: Some("postgres".to_owned()),
        port: POSTGRES_PORT,
        target_port: Some(IntOrString::String("postgres".to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }
}

/// On `-rw`: its endpoints are the operator's EndpointSlice (`rw_endpoints`), not a selector's.
/// A Service of an earlier Tusk lacks it: the routing step then moves it over (`ha::routing`).
pub const RW_ROUTING_ANNOTATION: &str = "tusk.dev/endpoints";
pub const RW_ROUTING_BY_OPERATOR: &str = "operator";

/// The database pods of `cluster` that carry role label `role`.
fn role_selector(cluster: &Cluster, role: &str) -> BTreeMap<String, String> {
    let mut selector = cluster.selector_labels(Component::Database);
    selector.insert(ROLE_LABEL.to_owned(), role.to_owned());
    selector
}

/// Service `<name>-rw`, without a selector: the operator writes its EndpointSlice at each
/// handover (`rw_endpoints`), so clients follow the Lease in one write instead of waiting for
/// kube-controller-manager to notice a label (~15 s behind during a burst of new clusters).
pub fn rw_service(cluster: &Cluster) -> Service {
    let mut service = service(cluster, cluster.rw_service_name(), None, false);
    service
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            RW_ROUTING_ANNOTATION.to_owned(),
            RW_ROUTING_BY_OPERATOR.to_owned(),
        );
    service
}

/// Service `<name>-ro`: the replicas, for read-only traffic that tolerates replication lag.
pub fn ro_service(cluster: &Cluster) -> Service {
    let selector = role_selector(cluster, ROLE_REPLICA);
    service(cluster, cluster.ro_service_name(), Some(selector), false)
}

/// Service `<name>-r`: every ready instance, primary or replica.
pub fn any_service(cluster: &Cluster) -> Service {
    let selector = cluster.selector_labels(Component::Database);
    service(cluster, cluster.any_service_name(), Some(selector), false)
}

/// Headless Service `<name>-hl`: the StatefulSet's `serviceName`; lists pods before they are
/// ready so that instances can find each other while starting.
pub fn headless_service(cluster: &Cluster) -> Service {
    let selector = cluster.selector_labels(Component::Database);
    service(
        cluster,
        cluster.headless_service_name(),
        Some(selector),
        true,
    )
}

fn service(
    cluster: &Cluster,
    name: String,
    selector: Option<BTreeMap<String, String>>,
    headless: bool,
) -> Service {
    Service {
        metadata: cluster.child_meta(name, Component::Database),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            cluster_ip: headless.then(|| "None".to_owned()),
            publish_not_ready_addresses: headless.then_some(true),
            selector,
            ports: Some(vec![postgres_port()]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    #[test]
    fn rw_service_has_no_selector_and_says_who_routes_it() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let svc = rw_service(&cluster);
        assert_eq!(svc.metadata.name.as_deref(), Some("demo-rw"));
        let annotations = svc.metadata.annotations.unwrap();
        assert_eq!(annotations[RW_ROUTING_ANNOTATION], RW_ROUTING_BY_OPERATOR);
        let spec = svc.spec.unwrap();
        assert_eq!(spec.cluster_ip, None);
        assert_eq!(
            spec.selector, None,
            "kube-controller-manager must not route it"
        );
        let port = &spec.ports.unwrap()[0];
        // The EndpointSlice's port carries the same name: that is how kube-proxy pairs them.
        assert_eq!((port.name.as_deref(), port.port), (Some("postgres"), 5432));
        assert_eq!(cluster.primary_host(), "demo-0.demo-hl.prod.svc");
    }

    #[test]
    fn ro_selects_the_replicas_and_r_every_instance() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let ro = ro_service(&cluster);
        assert_eq!(ro.metadata.name.as_deref(), Some("demo-ro"));
        let selector = ro.spec.unwrap().selector.unwrap();
        assert_eq!(selector["tusk.dev/role"], "replica");
        let any = any_service(&cluster);
        assert_eq!(any.metadata.name.as_deref(), Some("demo-r"));
        let selector = any.spec.unwrap().selector.unwrap();
        assert!(!selector.contains_key("tusk.dev/role"));
        assert_eq!(selector["app.kubernetes.io/component"], "database");
    }

    #[test]
    fn headless_service_publishes_unready_pods() {
        let pg = postgresql(MINIMAL);
        let svc = headless_service(&Cluster::new(&pg).unwrap());
        assert_eq!(svc.metadata.name.as_deref(), Some("demo-hl"));
        let spec = svc.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        assert!(!spec.selector.unwrap().contains_key("tusk.dev/role"));
    }
}
