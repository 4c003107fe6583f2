//! The Services clients use — `-rw` (the primary), `-ro` (the replicas), `-r` (any instance) —
//! and the headless Service that gives the StatefulSet's pods their stable DNS names.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Cluster, Component, POSTGRES_PORT, ROLE_LABEL, ROLE_PRIMARY, ROLE_REPLICA};

fn postgres_port() -> ServicePort {
    ServicePort {
        name: Some("postgres".to_owned()),
        port: POSTGRES_PORT,
        target_port: Some(IntOrString::String("postgres".to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }
}

/// A selector label no pod carries: the `-rw` Service selects nothing while it is set.
pub const CLIENTS_HELD_LABEL: &str = "tusk.dev/clients";
const CLIENTS_HELD_VALUE: &str = "held-until-restored";

/// The database pods of `cluster` that carry role label `role`.
fn role_selector(cluster: &Cluster, role: &str) -> BTreeMap<String, String> {
    let mut selector = cluster.selector_labels(Component::Database);
    selector.insert(ROLE_LABEL.to_owned(), role.to_owned());
    selector
}

/// Service `<name>-rw`: routes to the pod labelled primary, which the operator labels only
/// after handing it the primary Lease (and unlabels first when it takes the Lease away).
/// Until a restore has finished (`clients` false) it selects no pod, so no application can
/// write first; the restore Job reaches the primary by its own DNS name instead.
pub fn rw_service(cluster: &Cluster, clients: bool) -> Service {
    let mut selector = role_selector(cluster, ROLE_PRIMARY);
    if !clients {
        selector.insert(CLIENTS_HELD_LABEL.to_owned(), CLIENTS_HELD_VALUE.to_owned());
    }
    service(cluster, cluster.rw_service_name(), selector, false)
}

/// Service `<name>-ro`: the replicas, for read-only traffic that tolerates replication lag.
pub fn ro_service(cluster: &Cluster) -> Service {
    let selector = role_selector(cluster, ROLE_REPLICA);
    service(cluster, cluster.ro_service_name(), selector, false)
}

/// Service `<name>-r`: every ready instance, primary or replica.
pub fn any_service(cluster: &Cluster) -> Service {
    let selector = cluster.selector_labels(Component::Database);
    service(cluster, cluster.any_service_name(), selector, false)
}

/// Headless Service `<name>-hl`: the StatefulSet's `serviceName`; lists pods before they are
/// ready so that instances can find each other while starting.
pub fn headless_service(cluster: &Cluster) -> Service {
    let selector = cluster.selector_labels(Component::Database);
    service(cluster, cluster.headless_service_name(), selector, true)
}

fn service(
    cluster: &Cluster,
    name: String,
    selector: BTreeMap<String, String>,
    headless: bool,
) -> Service {
    Service {
        metadata: cluster.child_meta(name, Component::Database),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            cluster_ip: headless.then(|| "None".to_owned()),
            publish_not_ready_addresses: headless.then_some(true),
            selector: Some(selector),
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
    fn rw_service_selects_only_the_primary_pod() {
        let pg = postgresql(MINIMAL);
        let svc = rw_service(&Cluster::new(&pg).unwrap(), true);
        assert_eq!(svc.metadata.name.as_deref(), Some("demo-rw"));
        let spec = svc.spec.unwrap();
        assert_eq!(spec.cluster_ip, None);
        let selector = spec.selector.unwrap();
        assert_eq!(selector["tusk.dev/role"], "primary");
        assert_eq!(selector["tusk.dev/cluster"], "demo");
        assert_eq!(selector["app.kubernetes.io/component"], "database");
        assert_eq!(spec.ports.unwrap()[0].port, 5432);
    }

    #[test]
    fn rw_service_routes_no_client_until_restored() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let held = rw_service(&cluster, false).spec.unwrap().selector.unwrap();
        assert_eq!(held[CLIENTS_HELD_LABEL], "held-until-restored");
        let open = rw_service(&cluster, true).spec.unwrap().selector.unwrap();
        assert!(!open.contains_key(CLIENTS_HELD_LABEL));
        // No pod carries the label: the StatefulSet's pod template does not.
        let agent = crate::resources::AgentSettings {
            image: "agent".into(),
        };
        let sts = crate::resources::statefulset(&cluster, "checksum", &agent);
        let labels = sts.spec.template.metadata.unwrap().labels.unwrap();
        assert!(!labels.contains_key(CLIENTS_HELD_LABEL));
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
