//! The Services clients use — `-rw` (the primary), `-ro` (the replicas), `-r` (any instance) —
//! and the headless Service that gives the StatefulSet's pods their stable DNS names.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Cluster, Component, POSTGRES_PORT};

fn postgres_port() -> ServicePort {
    ServicePort {
        name: Some("postgres".to_owned()),
        port: POSTGRES_PORT,
        target_port: Some(IntOrString::String("postgres".to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }
}

/// On `-rw`, `-ro` and `-r`: their endpoints are the operator's EndpointSlices (`endpoints`),
/// not a selector's. A Service of an earlier Tusk lacks it: the routing step then moves it over
/// (`ha::routing`).
pub const ROUTING_ANNOTATION: &str = "tusk.dev/endpoints";
pub const ROUTED_BY_OPERATOR: &str = "operator";

/// A client Service without a selector: the operator writes its EndpointSlice (`endpoints`),
/// so it follows a handover or a replica's readiness in one write instead of waiting for
/// kube-controller-manager to notice a label (~15 s behind during a burst of new clusters), and
/// only the pods the operator chooses serve.
fn routed_service(cluster: &Cluster, name: String) -> Service {
    let mut service = service(cluster, name, None, false);
    service
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ROUTING_ANNOTATION.to_owned(), ROUTED_BY_OPERATOR.to_owned());
    service
}

/// Service `<name>-rw`: the primary.
pub fn rw_service(cluster: &Cluster) -> Service {
    routed_service(cluster, cluster.rw_service_name())
}

/// Service `<name>-ro`: the replicas, for read-only traffic that tolerates replication lag.
pub fn ro_service(cluster: &Cluster) -> Service {
    routed_service(cluster, cluster.ro_service_name())
}

/// Service `<name>-r`: every ready instance, primary or replica.
pub fn any_service(cluster: &Cluster) -> Service {
    routed_service(cluster, cluster.any_service_name())
}

/// The client Services, each routed by the operator: `-rw`, `-ro`, `-r`.
pub fn client_services(cluster: &Cluster) -> [Service; 3] {
    [
        rw_service(cluster),
        ro_service(cluster),
        any_service(cluster),
    ]
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
    fn client_services_have_no_selector_and_say_who_routes_them() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let names = client_services(&cluster).map(|svc| {
            let annotations = svc.metadata.annotations.unwrap();
            assert_eq!(annotations[ROUTING_ANNOTATION], ROUTED_BY_OPERATOR);
            let spec = svc.spec.unwrap();
            assert_eq!(spec.cluster_ip, None);
            assert_eq!(
                spec.selector, None,
                "kube-controller-manager must not route it"
            );
            let port = &spec.ports.unwrap()[0];
            // The EndpointSlice's port carries the same name: that is how kube-proxy pairs them.
            assert_eq!((port.name.as_deref(), port.port), (Some("postgres"), 5432));
            svc.metadata.name.unwrap()
        });
        assert_eq!(names, ["demo-rw", "demo-ro", "demo-r"]);
        assert_eq!(cluster.primary_host(), "demo-0.demo-hl.prod.svc");
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
