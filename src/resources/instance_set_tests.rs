//! The serving set of instances (`status.instanceSet`): what is named after it and what stays
//! the cluster's.

use super::fixtures::*;
use super::*;
use crate::crd::PostgreSQL;

fn serving(set: Option<&str>) -> PostgreSQL {
    let mut pg = postgresql("instances: 3\nstorage: {size: 1Gi}");
    pg.status = Some(crate::crd::PostgreSQLStatus {
        instance_set: set.map(str::to_owned),
        current_primary: Some(format!("{}-1", set.unwrap_or("demo"))),
        ..Default::default()
    });
    pg
}

#[test]
fn a_cluster_without_a_recorded_set_is_served_by_the_set_of_its_name() {
    let pg = serving(None);
    let cluster = Cluster::new(&pg).unwrap();
    assert_eq!(cluster.statefulset_name(), "demo");
    assert_eq!(cluster.lease_name(), "demo-primary");
    assert_eq!(cluster.pod_names(), ["demo-0", "demo-1", "demo-2"]);
    assert_eq!(cluster.ordinal("demo-2"), Some(2));
}

#[test]
fn another_set_names_the_statefulset_its_pods_and_its_lease_and_nothing_else() {
    let pg = serving(Some("demo-v17"));
    let cluster = Cluster::new(&pg).unwrap();
    assert_eq!(cluster.statefulset_name(), "demo-v17");
    assert_eq!(cluster.lease_name(), "demo-v17-primary");
    assert_eq!(
        cluster.pod_names(),
        ["demo-v17-0", "demo-v17-1", "demo-v17-2"]
    );
    assert_eq!(cluster.ordinal("demo-v17-1"), Some(1));
    assert_eq!(cluster.ordinal("demo-1"), None, "the other set's pod");
    assert_eq!(cluster.kept_pods(), 3);
    assert_eq!(cluster.primary_host(), "demo-v17-0.demo-hl.prod.svc");
    // The pods' environment names the set's Lease; their DNS names stay under `<name>-hl`.
    let agent = AgentSettings {
        image: "ghcr.io/tusk/backup-agent:test".into(),
    };
    let sts = statefulset(&cluster, "checksum", &agent);
    assert_eq!(sts.metadata.name.as_deref(), Some("demo-v17"));
    let spec = sts.spec;
    assert_eq!(spec.service_name.as_deref(), Some("demo-hl"));
    let env = spec.template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    let lease = env.iter().find(|e| e.name == "TUSK_LEASE").unwrap();
    assert_eq!(lease.value.as_deref(), Some("demo-v17-primary"));
    // The cluster's children keep the cluster's name.
    assert_eq!(cluster.headless_service_name(), "demo-hl");
    assert_eq!(
        rw_service(&cluster).metadata.name.as_deref(),
        Some("demo-rw")
    );
    assert_eq!(cluster.config_map_name(), "demo-config");
    let budget = disruption_budget(&cluster).unwrap();
    assert_eq!(budget.metadata.name.as_deref(), Some("demo"));
    let names = tls::server_names(&cluster, "cluster.local");
    assert!(names.iter().any(|n| n == "demo-v17-0.demo-hl"), "{names:?}");
}
