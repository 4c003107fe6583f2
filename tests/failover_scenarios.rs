//! Mock-API scenarios pinning the calls of a failover: the Lease is read while its holder's pod
//! does not serve, handed over only once it went unrenewed for its whole duration, and the role
//! labels move so that `-rw` never routes to two instances.

mod support;

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use support::memory_store::MemoryBucket;
use support::paths::{LEASES, PODS, STATUS};
use support::read::event_reason;
use support::verifier::{self, Expect, Seen};
use support::world::*;
use tusk::PostgreSQL;
use tusk::clusters::election::{InstanceReport, ReportedLsns};
use tusk::clusters::status::BackupSchedule;
use tusk::runtime::instances::{InstanceStatus, LeaseClock};

const THREE: &str = "instances: 3\nstorage: {size: 1Gi}";

/// Instance managers answering by pod IP, as the replicas would.
struct Managers(Vec<(&'static str, InstanceReport)>);

#[async_trait::async_trait]
impl InstanceStatus for Managers {
    async fn report(&self, ip: &str) -> Option<InstanceReport> {
        self.0
            .iter()
            .find(|(at, _)| *at == ip)
            .map(|(_, r)| r.clone())
    }
}

fn replica(pod: &str, received: &str) -> InstanceReport {
    InstanceReport {
        pod: pod.into(),
        role: "replica".into(),
        postgres: "running".into(),
        timeline: Some(1),
        lsn: ReportedLsns {
            current: None,
            received: Some(received.into()),
            replayed: Some(received.into()),
        },
    }
}

fn pod(name: &str, role: &str, ready: bool, ip: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {
            "tusk.dev/cluster": "demo", "app.kubernetes.io/component": "database",
            "tusk.dev/role": role}},
        "status": {"podIP": ip, "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .expect("a valid Pod")
}

/// The primary Lease as the API server returns it: held by demo-0, never renewed again.
fn lease() -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "demo-primary", "namespace": NS, "resourceVersion": "41"},
        "spec": {"holderIdentity": "demo-0", "leaseDurationSeconds": 6,
                 "renewTime": "2026-11-24T08:00:00.000000Z", "leaseTransitions": 0},
    })
}

fn read_lease() -> Expect {
    Expect::new(Method::GET, format!("{LEASES}/demo-primary"), |_| {
        (StatusCode::OK, lease())
    })
}

/// A converged three-instance cluster whose StatefulSet counts `ready` ready pods.
fn three_instances(ready: i32) -> (PostgreSQL, Cache) {
    let (pg, mut cache) = converged(THREE, true, BackupSchedule::NotConfigured);
    let status = cache.statefulsets[0].status.as_mut().expect("status");
    status.replicas = 3;
    status.ready_replicas = Some(ready);
    status.updated_replicas = Some(3);
    (pg, cache)
}

/// A Ready three-instance cluster whose primary, demo-0, just became unready.
fn lost_primary() -> (PostgreSQL, Cache) {
    let (pg, mut cache) = three_instances(2);
    cache.pods = vec![
        pod("demo-0", "primary", false, "10.0.0.10"),
        pod("demo-1", "replica", true, "10.0.0.11"),
        pod("demo-2", "replica", true, "10.0.0.12"),
    ];
    (pg, cache)
}

/// One reconcile of `pg` against `script`, with the given Lease memory.
async fn reconcile(
    pg: &PostgreSQL,
    cache: Cache,
    clock: &Arc<LeaseClock>,
    script: Vec<Expect>,
) -> (kube::runtime::controller::Action, Vec<Seen>) {
    let (client, server) = verifier::client();
    let managers = Managers(vec![
        ("10.0.0.11", replica("demo-1", "0/5000000")),
        ("10.0.0.12", replica("demo-2", "0/6000000")),
    ]);
    let ctx = plain_context(client, pg, cache, MemoryBucket::default())
        .with_instances(Arc::new(managers))
        .with_lease_clock(clock.clone());
    let (done, finished) = tokio::sync::oneshot::channel();
    let played = server.play(script, finished);
    let action = Box::pin(tusk::clusters::reconcile(
        Arc::new(pg.clone()),
        Arc::new(ctx),
    ))
    .await
    .expect("reconcile succeeded");
    let _ = done.send(());
    let seen = played
        .await
        .expect("verifier ran")
        .unwrap_or_else(|e| panic!("{e}"));
    (action, seen)
}

#[tokio::test(start_paused = true)]
async fn a_lost_primary_is_replaced_by_the_most_advanced_replica_after_its_lease_expires() {
    let (pg, cache) = lost_primary();
    let clock = Arc::new(LeaseClock::default());

    // First look: the Lease may still be renewed (a restart in place), so only watch it.
    let script = vec![
        read_lease(),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (action, seen) = reconcile(&pg, cache.clone(), &clock, script).await;
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(1))
    );
    assert_eq!(seen[1].body["status"]["currentPrimary"], "demo-0");
    assert_eq!(event_reason(&seen[2]), "NotReady");

    // Unchanged for longer than its duration: demo-0 has fenced itself; demo-2 received most.
    tokio::time::advance(Duration::from_secs(7)).await;
    let script = vec![
        read_lease(),
        Expect::apply(format!("{PODS}/demo-0")),
        Expect::new(Method::PUT, format!("{LEASES}/demo-primary"), |body| {
            (StatusCode::OK, body.clone())
        }),
        Expect::apply(format!("{PODS}/demo-2")),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let (_, seen) = reconcile(&pg, cache, &clock, script).await;
    assert_eq!(
        seen[1].body["metadata"]["labels"]["tusk.dev/role"],
        "replica"
    );
    let handed = &seen[2].body;
    assert_eq!(handed["spec"]["holderIdentity"], "demo-2");
    assert_eq!(handed["spec"]["leaseTransitions"], 1);
    // The read version: a holder that renewed meanwhile makes this a conflict, not a takeover.
    assert_eq!(handed["metadata"]["resourceVersion"], "41");
    assert_eq!(
        handed["metadata"]["annotations"]["tusk.dev/instances"],
        "demo-0,demo-1,demo-2"
    );
    assert_eq!(
        seen[3].body["metadata"]["labels"]["tusk.dev/role"],
        "primary"
    );
    assert_eq!(event_reason(&seen[5]), "FailedOver");
    let status = &seen[4].body["status"];
    assert_eq!(status["currentPrimary"], "demo-2");
    assert_eq!(status["lastFailover"]["from"], "demo-0");
    assert_eq!(status["lastFailover"]["to"], "demo-2");
    assert_eq!(status["lastFailover"]["reason"], "PrimaryLost");
}

#[tokio::test(start_paused = true)]
async fn no_replica_answering_blocks_the_failover_with_a_warning() {
    let (pg, mut cache) = lost_primary();
    for pod in &mut cache.pods {
        // No IP: nothing to ask, so nothing can be promoted.
        if let Some(status) = pod.status.as_mut() {
            status.pod_ip = None;
        }
    }
    let clock = Arc::new(LeaseClock::default());
    let script = vec![
        read_lease(),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    reconcile(&pg, cache.clone(), &clock, script).await;
    tokio::time::advance(Duration::from_secs(7)).await;
    let script = vec![
        read_lease(),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let (action, seen) = reconcile(&pg, cache, &clock, script).await;
    assert_eq!(seen[1].body["status"]["currentPrimary"], "demo-0");
    assert_eq!(event_reason(&seen[2]), "FailoverBlocked");
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(2))
    );
}

#[tokio::test]
async fn a_serving_primary_costs_no_lease_read() {
    let (pg, mut cache) = three_instances(3);
    cache.pods = vec![
        pod("demo-0", "primary", true, "10.0.0.10"),
        pod("demo-1", "replica", true, "10.0.0.11"),
        pod("demo-2", "replica", true, "10.0.0.12"),
    ];
    let clock = Arc::new(LeaseClock::default());
    // Only the status (the instances appear in it); no Lease read, no label write.
    let (_, seen) = reconcile(&pg, cache, &clock, vec![Expect::apply_status(STATUS)]).await;
    let instances = &seen[0].body["status"]["instanceStates"];
    assert_eq!(instances[0]["pod"], "demo-0");
    assert_eq!(instances[0]["role"], "primary");
    assert_eq!(instances[2]["role"], "replica");
}
