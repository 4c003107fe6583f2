//! Mock-API scenarios pinning how a replicated cluster rolls onto a new StatefulSet revision:
//! one outdated replica deleted per step, never while another instance is unready, and the
//! primary moved by a switchover before it is restarted; an update that lowers a hot-standby
//! setting waits for the primary to run the lower value first.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use support::paths::{PODS, STATUS};
use support::read::event_reason;
use support::replicas::{
    self, Managers, managers, read_lease, three_instances, three_instances_of, three_pods,
};
use support::verifier::Expect;
use support::world::*;
use tusk::PostgreSQL;
use tusk::runtime::instances::LeaseClock;

/// A three-instance cluster, demo-0 primary, every pod ready, whose StatefulSet moved to
/// revision `demo-new`; the pods at `updated` ordinals run it, the others `demo-old`. Until
/// every pod runs it the cluster is rolling out, so not Ready (the `NotReady` Event after the
/// step's own), as the pods' revision labels say.
fn rolling(updated: &[usize]) -> (PostgreSQL, Cache) {
    rolling_of(three_instances(3), updated)
}

fn rolling_of((pg, mut cache): (PostgreSQL, Cache), updated: &[usize]) -> (PostgreSQL, Cache) {
    if let Some(status) = cache.statefulsets[0].status.as_mut() {
        status.update_revision = Some("demo-new".into());
    }
    let mut pods: Vec<Pod> = three_pods(true);
    for (ordinal, pod) in pods.iter_mut().enumerate() {
        let revision = if updated.contains(&ordinal) {
            "demo-new"
        } else {
            "demo-old"
        };
        pod.metadata
            .labels
            .get_or_insert_default()
            .insert("controller-revision-hash".into(), revision.into());
    }
    cache.set_pods(&pg, pods);
    (pg, cache)
}

#[tokio::test]
async fn the_highest_outdated_replica_restarts_first() {
    let (pg, cache) = rolling(&[]);
    let delete = Expect::delete(format!("{PODS}/demo-2"));
    let script = vec![
        read_lease(Some("demo-0"), json!({})),
        delete,
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let clock = Arc::new(LeaseClock::default());
    let managers = managers("0/5000000", "0/5000000");
    let (_, seen) = replicas::reconcile(&pg, cache, &clock, managers, script).await;
    assert_eq!(event_reason(&seen[3]), "RollingUpdate");
    assert_eq!(event_reason(&seen[4]), "NotReady", "rolling out");
}

#[tokio::test]
async fn nothing_restarts_while_an_instance_is_unready() {
    let (pg, mut cache) = rolling(&[2]);
    // demo-2 came back on the new revision but is not ready yet (and so not routed).
    let mut pods = cache.pods.clone();
    if let Some(conditions) = pods[2].status.as_mut().and_then(|s| s.conditions.as_mut()) {
        conditions[0].status = "False".into();
    }
    cache.set_pods(&pg, pods);
    let clock = Arc::new(LeaseClock::default());
    let managers = managers("0/5000000", "0/5000000");
    let script = vec![
        read_lease(Some("demo-0"), json!({})),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (_, seen) = replicas::reconcile(&pg, cache, &clock, managers, script).await;
    assert_eq!(
        event_reason(&seen[2]),
        "NotReady",
        "2/3 ready, as the pods say"
    );
}

#[tokio::test]
async fn an_outdated_primary_is_switched_over_to_the_most_advanced_updated_replica() {
    let (pg, cache) = rolling(&[1, 2]);
    let script = vec![
        read_lease(Some("demo-0"), json!({})),
        replicas::write_lease(),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let clock = Arc::new(LeaseClock::default());
    // demo-2 has replayed more: it takes over.
    let managers = managers("0/5000000", "0/6000000");
    let (_, seen) = replicas::reconcile(&pg, cache, &clock, managers, script).await;
    let annotations = &seen[1].body["metadata"]["annotations"];
    assert_eq!(annotations["tusk.dev/switchover-to"], "demo-2");
    assert_eq!(seen[2].body["status"]["targetPrimary"], "demo-2");
    assert_eq!(event_reason(&seen[3]), "SwitchoverStarted");
    assert_eq!(event_reason(&seen[4]), "NotReady", "rolling out");
}

#[tokio::test]
async fn scaling_up_brings_the_leases_member_list_up_to_date() {
    let (mut pg, mut cache) = three_instances(3);
    cache.set_pods(&pg, three_pods(true));
    // Grown from one instance: the status still says 1.
    if let Some(status) = pg.status.as_mut() {
        status.instances = 1;
    }
    let script = vec![
        read_lease(Some("demo-0"), json!({"tusk.dev/instances": "demo-0"})),
        replicas::write_lease(),
        Expect::apply_status(STATUS),
    ];
    let clock = Arc::new(LeaseClock::default());
    let managers = managers("0/5000000", "0/5000000");
    let (_, seen) = replicas::reconcile(&pg, cache, &clock, managers, script).await;
    let members = &seen[1].body["metadata"]["annotations"]["tusk.dev/instances"];
    assert_eq!(members, "demo-0,demo-1,demo-2");
    assert_eq!(seen[1].body["spec"]["holderIdentity"], "demo-0");
    assert_eq!(seen[2].body["status"]["instances"], 3);
}

#[tokio::test]
async fn a_lowered_max_connections_restarts_no_replica_before_the_primary_runs_it() {
    let spec = "instances: 3\nstorage: {size: 1Gi}\nparameters: {max_connections: \"50\"}";
    let primary_running = |max_connections: i64| {
        let mut report = replicas::replica("demo-0", "0/5000000");
        report.role = tusk::runtime::instances::Role::Primary;
        report.hot_standby_settings = [("max_connections".to_owned(), max_connections)].into();
        let Managers(mut reports) = managers("0/5000000", "0/5000000");
        reports.push(("10.0.0.10", report));
        Managers(reports)
    };
    let clock = Arc::new(LeaseClock::default());
    // The primary still runs 100: a replica restarted now would refuse to run below it.
    let (pg, cache) = rolling_of(three_instances_of(spec, 3), &[]);
    let script = vec![
        read_lease(Some("demo-0"), json!({})),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let (action, seen) =
        replicas::reconcile(&pg, cache, &clock, primary_running(100), script).await;
    assert_eq!(event_reason(&seen[2]), "RollingUpdate");
    assert_eq!(event_reason(&seen[3]), "NotReady", "rolling out");
    let note = seen[2].body["note"].as_str().unwrap_or_default();
    assert!(note.contains("lowers max_connections"), "{note}");
    let soon = kube::runtime::controller::Action::requeue(std::time::Duration::from_secs(5));
    assert_eq!(action, soon, "looked at again soon");
    // Its manager restarted it in place with 50: replicas restart, highest first.
    let (pg, cache) = rolling_of(three_instances_of(spec, 3), &[]);
    let script = vec![
        read_lease(Some("demo-0"), json!({})),
        Expect::delete(format!("{PODS}/demo-2")),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    replicas::reconcile(&pg, cache, &clock, primary_running(50), script).await;
}
