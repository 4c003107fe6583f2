//! The Services clients use — `-rw` (the primary), `-ro` (the replicas), `-r` (any instance) —
//! and the headless Service that gives the StatefulSet's pods their stable DNS names.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Cluster, Component, POSTGRES_PORT};
use crate::crd::ClientService;

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

/// Whether `cluster` has the client Service `service` (`spec.services.disabled`).
pub fn has_client_service(cluster: &Cluster, service: ClientService) -> bool {
    (cluster.spec.services.as_ref()).is_none_or(|services| services.enabled(service))
}

/// The optional client Services with their names: `-ro` (the replicas, for read-only traffic
/// that tolerates replication lag) and `-r` (every ready instance).
fn optional_services(cluster: &Cluster) -> [(ClientService, String); 2] {
    [
        (ClientService::ReadOnly, cluster.ro_service_name()),
        (ClientService::Any, cluster.any_service_name()),
    ]
}

/// The names of the client Services: `-rw`, then `-ro` and `-r` unless `spec.services`
/// disables them.
pub fn client_service_names(cluster: &Cluster) -> Vec<String> {
    let optional = optional_services(cluster).into_iter();
    let enabled = optional.filter(|(service, _)| has_client_service(cluster, *service));
    std::iter::once(cluster.rw_service_name())
        .chain(enabled.map(|(_, name)| name))
        .collect()
}

/// The client Services (`client_service_names`), each routed by the operator.
pub fn client_services(cluster: &Cluster) -> Vec<Service> {
    let names = client_service_names(cluster).into_iter();
    names.map(|name| routed_service(cluster, name)).collect()
}

/// The names of the client Services `spec.services` disables: deleted if they exist.
pub fn disabled_client_services(cluster: &Cluster) -> Vec<String> {
    let optional = optional_services(cluster).into_iter();
    optional
        .filter(|(service, _)| !has_client_service(cluster, *service))
        .map(|(_, name)| name)
        .collect()
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
    use serde_json::json;

    #[test]
    fn client_services_have_no_selector_and_say_who_routes_them() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let names: Vec<String> = client_services(&cluster)
            .into_iter()
            .map(|svc| {
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
            })
            .collect();
        assert_eq!(names, ["demo-rw", "demo-ro", "demo-r"]);
        assert!(disabled_client_services(&cluster).is_empty());
        assert_eq!(cluster.primary_host(), "demo-0.demo-hl.prod.svc");
    }

    #[test]
    fn disabled_client_services_are_not_built_and_are_named_for_deletion() {
        let name = |svc: &Service| svc.metadata.name.clone().unwrap();
        for (disabled, built, gone) in [
            (json!(["ro"]), vec!["demo-rw", "demo-r"], vec!["demo-ro"]),
            (json!(["r"]), vec!["demo-rw", "demo-ro"], vec!["demo-r"]),
            (
                json!(["ro", "r"]),
                vec!["demo-rw"],
                vec!["demo-ro", "demo-r"],
            ),
        ] {
            let mut pg = postgresql(MINIMAL);
            pg.spec.services = serde_json::from_value(json!({"disabled": disabled})).unwrap();
            let cluster = Cluster::new(&pg).unwrap();
            let built_names: Vec<String> = client_services(&cluster).iter().map(name).collect();
            assert_eq!(built_names, built, "{disabled}");
            assert_eq!(disabled_client_services(&cluster), gone, "{disabled}");
        }
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
