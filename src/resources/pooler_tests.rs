use super::*;
use crate::crd::PoolMode;
use crate::resources::fixtures::*;

fn agent() -> AgentSettings {
    AgentSettings {
        image: "ghcr.io/tusk/backup-agent:test".into(),
    }
}

#[test]
fn the_pooler_runs_pgbouncer_under_the_instance_manager_following_the_lease() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let spec = PoolerSpec {
        pool_mode: PoolMode::Session,
        ..PoolerSpec::default()
    };
    let deployment = pooler_deployment(&cluster, &spec, &agent(), Side::Primary);
    assert_eq!(deployment.metadata.name.as_deref(), Some("demo-pooler"));
    let spec_d = deployment.spec;
    assert_eq!(spec_d.replicas, Some(2));
    let pod = spec_d.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("demo-pooler"));
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some(DEFAULT_POOLER_IMAGE));
    let command = container.command.clone().unwrap().join(" ");
    assert!(command.starts_with("/tusk/bin/tusk-instance pooler --lease demo-primary"));
    assert!(
        command.contains("--peer-domain demo-hl.prod.svc"),
        "{command}"
    );
    assert!(command.contains("--pool-mode session"), "{command}");
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    // The pods are the pooler's own component: no database Service or cache selects them.
    let labels = spec_d.template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels["app.kubernetes.io/component"], "pooler");
    let init = &pod.init_containers.unwrap()[0];
    assert_eq!(
        init.image.as_deref(),
        Some("ghcr.io/tusk/backup-agent:test")
    );
}

#[test]
fn the_poolers_role_reads_the_primary_lease_by_name_and_nothing_else() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let rules = pooler_role(&cluster).rules.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["leases".to_owned()][..])
    );
    assert_eq!(
        rules[0].resource_names.as_deref(),
        Some(&["demo-primary".to_owned()][..])
    );
    assert_eq!(rules[0].verbs, ["get", "list", "watch"]);
}

#[test]
fn the_pooler_service_publishes_pgbouncer_on_the_postgres_port() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let service = pooler_service(&cluster, Side::Primary);
    assert_eq!(service.metadata.name.as_deref(), Some("demo-pooler-rw"));
    let spec = service.spec.unwrap();
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.port, 5432);
    assert_eq!(
        port.target_port,
        Some(IntOrString::String("pgbouncer".into()))
    );
    assert_eq!(
        spec.selector.unwrap()["app.kubernetes.io/component"],
        "pooler"
    );
}

#[test]
fn the_read_only_pooler_routes_to_the_replicas_and_is_selected_by_its_own_service_only() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let spec = PoolerSpec {
        read_only: true,
        ..PoolerSpec::default()
    };
    let deployment = pooler_deployment(&cluster, &spec, &agent(), Side::Replicas);
    assert_eq!(deployment.metadata.name.as_deref(), Some("demo-pooler-ro"));
    let pod = deployment.spec.template.spec.clone().unwrap();
    let command = pod.containers[0].command.clone().unwrap().join(" ");
    assert!(
        command.ends_with("--route-to demo-ro.prod.svc"),
        "{command}"
    );
    assert_eq!(
        pod.automount_service_account_token,
        Some(false),
        "it reads no Lease"
    );
    let ro_labels = deployment.spec.template.metadata.unwrap().labels.unwrap();
    let rw_selector = pooler_service(&cluster, Side::Primary)
        .spec
        .unwrap()
        .selector
        .unwrap();
    assert!(
        rw_selector.iter().any(|(k, v)| ro_labels.get(k) != Some(v)),
        "the -rw Service must not select the read-only pods"
    );
    let ro_service = pooler_service(&cluster, Side::Replicas);
    assert_eq!(ro_service.metadata.name.as_deref(), Some("demo-pooler-ro"));
    let ro_selector = ro_service.spec.unwrap().selector.unwrap();
    assert!(ro_selector.iter().all(|(k, v)| ro_labels.get(k) == Some(v)));
    let rw = pooler_deployment(&cluster, &spec, &agent(), Side::Primary);
    let rw_selector = rw.spec.selector.match_labels.unwrap();
    assert!(
        rw_selector.iter().any(|(k, v)| ro_labels.get(k) != Some(v)),
        "the Deployments' selectors must not overlap"
    );
}
