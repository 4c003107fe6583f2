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
    // The cluster's children keep the cluster's name; the configuration is the set's.
    assert_eq!(cluster.headless_service_name(), "demo-hl");
    assert_eq!(
        rw_service(&cluster).metadata.name.as_deref(),
        Some("demo-rw")
    );
    assert_eq!(cluster.config_map_name(), "demo-v17-config");
    let budget = disruption_budget(&cluster).unwrap();
    assert_eq!(budget.metadata.name.as_deref(), Some("demo"));
    let names = tls::server_names(&cluster, "cluster.local");
    assert!(names.iter().any(|n| n == "demo-v17-0.demo-hl"), "{names:?}");
}

/// A cluster whose spec asks for 17 while an upgrade from 15 is in `phase`, serving `serving`.
fn upgrading(phase: crate::crd::UpgradePhase, serving: Option<&str>) -> PostgreSQL {
    let mut pg = postgresql(
        "version: \"17\"\ninstances: 3\nreplication: {synchronous: {number: 1}}\n\
         storage: {size: 1Gi}",
    );
    pg.status = Some(crate::crd::PostgreSQLStatus {
        instance_set: serving.map(str::to_owned),
        upgrade: Some(crate::crd::UpgradeStatus {
            from: 15,
            to: 17,
            phase,
            phase_since: None,
            from_set: "demo".into(),
            new_set: "demo-v17".into(),
            copy_from: None,
            from_image: "registry.example/postgres:15".into(),
            method: crate::crd::UpgradeMethod::Online,
            pod: None,
            frozen_lsn: None,
            message: None,
        }),
        ..Default::default()
    });
    pg
}

fn image(sts: &k8s_openapi::api::apps::v1::StatefulSet) -> Option<String> {
    let pod = sts.spec.template.spec.as_ref()?;
    pod.containers[0].image.clone()
}

#[test]
fn during_an_upgrade_the_old_set_keeps_its_image_and_the_new_set_has_its_own_pods_and_lease() {
    let pg = upgrading(crate::crd::UpgradePhase::Copying, None);
    let cluster = Cluster::new(&pg).unwrap();
    let agent = AgentSettings {
        image: "ghcr.io/tusk/backup-agent:test".into(),
    };
    // The serving set: as before the upgrade, on the old image, its selector unchanged.
    let old = statefulset(&cluster, "checksum", &agent);
    assert_eq!(old.metadata.name.as_deref(), Some("demo"));
    assert_eq!(image(&old).as_deref(), Some("registry.example/postgres:15"));
    let selector = old.spec.selector.match_labels.clone();
    assert!(!selector.unwrap().contains_key(INSTANCE_SET_LABEL));
    // The new set: the spec's image, its own pods, label, selector and Lease.
    let new = statefulset(&cluster.set("demo-v17"), "checksum", &agent);
    assert_eq!(new.metadata.name.as_deref(), Some("demo-v17"));
    assert_eq!(
        image(&new).as_deref(),
        Some("docker.io/library/postgres:17")
    );
    let spec = new.spec;
    let selector = spec.selector.match_labels.unwrap();
    assert_eq!(
        selector.get(INSTANCE_SET_LABEL).map(String::as_str),
        Some("demo-v17")
    );
    let template = spec.template;
    let labels = template.metadata.unwrap().labels.unwrap();
    assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let env = template.spec.unwrap().containers[0].env.clone().unwrap();
    let lease = env.iter().find(|e| e.name == "TUSK_LEASE").unwrap();
    assert_eq!(lease.value.as_deref(), Some("demo-v17-primary"));
    // Both sets' pods are named by the certificate and reach their Lease; each set's
    // configuration is its own, so the serving set's never changes (which would restart it).
    let names = tls::server_names(&cluster, "cluster.local");
    for pod in ["demo-2.demo-hl", "demo-v17-2.demo-hl"] {
        assert!(names.iter().any(|n| n == pod), "{pod}: {names:?}");
    }
    let role = instance_role(&cluster);
    let leases = role.rules.unwrap()[0].resource_names.clone().unwrap();
    assert_eq!(leases, ["demo-primary", "demo-v17-primary"]);
    let before = postgresql(
        "version: \"15\"\ninstances: 3\nreplication: {synchronous: {number: 1}}\n\
         storage: {size: 1Gi}",
    );
    let serving = config::config_map(&cluster).unwrap();
    assert_eq!(
        serving,
        config::config_map(&Cluster::new(&before).unwrap()).unwrap()
    );
    let incoming = config::config_map(&cluster.set("demo-v17")).unwrap();
    assert_eq!(incoming.metadata.name.as_deref(), Some("demo-v17-config"));
    let standbys = |cm: &k8s_openapi::api::core::v1::ConfigMap| {
        let conf = cm.data.as_ref().unwrap()["postgresql.conf"].clone();
        conf.lines()
            .find(|l| l.starts_with("synchronous_standby_names"))
            .unwrap()
            .to_owned()
    };
    assert!(
        standbys(&serving).contains("\"demo-1\""),
        "{}",
        standbys(&serving)
    );
    assert!(
        !standbys(&serving).contains("demo-v17"),
        "{}",
        standbys(&serving)
    );
    assert!(
        standbys(&incoming).contains("\"demo-v17-1\""),
        "{}",
        standbys(&incoming)
    );
    assert!(
        !standbys(&incoming).contains("\"demo-1\""),
        "{}",
        standbys(&incoming)
    );
}

#[test]
fn after_the_switch_only_the_new_set_is_named_and_it_runs_the_specs_image() {
    let pg = upgrading(crate::crd::UpgradePhase::Retiring, Some("demo-v17"));
    let cluster = Cluster::new(&pg).unwrap();
    assert_eq!(cluster.sets(), ["demo-v17"]);
    assert_eq!(cluster.postgres_image(), "docker.io/library/postgres:17");
    let names = tls::server_names(&cluster, "cluster.local");
    assert!(!names.iter().any(|n| n == "demo-0.demo-hl"), "{names:?}");
    assert_eq!(cluster.lease_names(), ["demo-v17-primary"]);
}

#[test]
fn the_server_secret_carries_the_upgrade_certificate_exactly_while_the_new_set_exists() {
    let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let lifetimes = tls::Lifetimes::default();
    let plain = postgresql("instances: 3\nstorage: {size: 1Gi}");
    for (pg, during) in [
        (upgrading(crate::crd::UpgradePhase::Copying, None), true),
        (
            upgrading(crate::crd::UpgradePhase::Retiring, Some("demo-v17")),
            false,
        ),
        (plain, false),
    ] {
        let cluster = Cluster::new(&pg).unwrap();
        let ca = tls::issue_ca(&cluster, now, &lifetimes).unwrap();
        let validity = tls::Validity::leaf(now, &lifetimes, now + lifetimes.ca);
        let issued = tls::ServerCertificates {
            server: tls::issue_server(&cluster, "cluster.local", &ca, validity).unwrap(),
            replication: tls::issue_replication(&cluster, &ca, validity).unwrap(),
            upgrade: upgrade_tls::issue_upgrade(&cluster, &ca, validity).unwrap(),
        };
        assert_eq!(issued.upgrade.is_some(), during);
        let secret = tls::server_secret(&cluster, &issued, &ca.cert, validity.until);
        assert_eq!(upgrade_tls::carries_upgrade_certificate(&secret), during);
        assert!(upgrade_tls::upgrade_certificate_current(&cluster, &secret));
        if let Some(upgrade) = &issued.upgrade {
            let (_, pem) = x509_parser::pem::parse_x509_pem(upgrade.cert.as_bytes()).unwrap();
            let cert = pem.parse_x509().unwrap();
            let name = cert.subject().iter_common_name().next().unwrap();
            assert_eq!(name.as_str().unwrap(), "tusk_upgrade");
        }
    }
    // A Secret issued before the upgrade started is due again, and one issued during it after.
    let during = upgrading(crate::crd::UpgradePhase::Copying, None);
    let before = k8s_openapi::api::core::v1::Secret::default();
    assert!(!upgrade_tls::upgrade_certificate_current(
        &Cluster::new(&during).unwrap(),
        &before
    ));
}

#[test]
fn a_version_raised_before_the_upgrade_is_recorded_never_rolls_the_serving_set() {
    let mut pg = postgresql("version: \"17\"\ninstances: 2\nstorage: {size: 1Gi}");
    // A cluster recorded before Tusk recorded the serving major: the spec is the truth (the
    // CRD refuses a change of spec.version until the major is recorded).
    assert_eq!(Cluster::new(&pg).unwrap().serving_major, 17);
    pg.status = Some(crate::crd::PostgreSQLStatus {
        version: Some(15),
        image: Some("registry.example/postgres:15".into()),
        ..Default::default()
    });
    let cluster = Cluster::new(&pg).unwrap();
    assert_eq!(cluster.serving_major, 15);
    assert_eq!(cluster.postgres_image(), "registry.example/postgres:15");
    assert_eq!(cluster.sets(), ["demo"]);
    // Once the serving major is the spec's, the spec's image serves (a minor update rolls).
    pg.status.as_mut().unwrap().version = Some(17);
    let cluster = Cluster::new(&pg).unwrap();
    assert_eq!(cluster.postgres_image(), "docker.io/library/postgres:17");
    assert_eq!(cluster.serving_major, 17);
}
