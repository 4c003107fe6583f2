//! A replicated cluster for the mock-API scenarios of failover and switchover: three pods,
//! their instance managers' reports, and one reconcile against a script.

use std::sync::Arc;

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use tusk::PostgreSQL;
use tusk::clusters::status::BackupSchedule;
use tusk::runtime::instances::{
    InstanceAddress, InstanceStatus, LeaseClock, Lsns, PostgresState, Role, StatusSource,
};

use super::memory_store::MemoryBucket;
use super::paths::LEASES;
use super::verifier::{self, Expect, Seen};
use super::world::{Cache, NS, converged, plain_context};

pub const THREE: &str = "instances: 3\nstorage: {size: 1Gi}";

/// Instance managers answering by pod IP, as the replicas would.
pub struct Managers(pub Vec<(&'static str, InstanceStatus)>);

#[async_trait::async_trait]
impl StatusSource for Managers {
    async fn report(&self, address: &InstanceAddress) -> Option<InstanceStatus> {
        self.0
            .iter()
            .find(|(at, _)| *at == address.ip)
            .map(|(_, r)| r.clone())
    }
}

/// A streaming replica that received and replayed up to `lsn`.
pub fn replica(pod: &str, lsn: &str) -> InstanceStatus {
    InstanceStatus {
        pod: pod.into(),
        role: Role::Replica,
        postgres: PostgresState::Running,
        timeline: Some(1),
        lsn: Lsns {
            current: None,
            received: Some(lsn.into()),
            replayed: Some(lsn.into()),
        },
        wal_receiver: Some("streaming".into()),
        ..InstanceStatus::default()
    }
}

/// demo-1 at 10.0.0.11 and demo-2 at 10.0.0.12, at the given LSNs.
pub fn managers(demo_1: &str, demo_2: &str) -> Managers {
    Managers(vec![
        ("10.0.0.11", replica("demo-1", demo_1)),
        ("10.0.0.12", replica("demo-2", demo_2)),
    ])
}

pub fn pod(name: &str, role: &str, ready: bool, ip: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {
            "tusk.dev/cluster": "demo", "app.kubernetes.io/component": "database",
            "tusk.dev/role": role}},
        "status": {"podIP": ip, "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .expect("a valid Pod")
}

/// A converged three-instance cluster whose StatefulSet counts `ready` ready pods.
pub fn three_instances(ready: i32) -> (PostgreSQL, Cache) {
    three_instances_of(THREE, ready)
}

/// Like [`three_instances`], for `spec` (which must say `instances: 3`).
pub fn three_instances_of(spec: &str, ready: i32) -> (PostgreSQL, Cache) {
    let (pg, mut cache) = converged(spec, true, BackupSchedule::NotConfigured);
    let status = cache.statefulsets[0].status.as_mut().expect("status");
    status.replicas = 3;
    status.ready_replicas = Some(ready);
    status.updated_replicas = Some(3);
    (pg, cache)
}

/// The three pods, demo-0 the primary; `primary_ready`: whether it serves.
pub fn three_pods(primary_ready: bool) -> Vec<Pod> {
    vec![
        pod("demo-0", "primary", primary_ready, "10.0.0.10"),
        pod("demo-1", "replica", true, "10.0.0.11"),
        pod("demo-2", "replica", true, "10.0.0.12"),
    ]
}

/// One reconcile of `pg` against `script`, with the given Lease memory and managers.
pub async fn reconcile(
    pg: &PostgreSQL,
    cache: Cache,
    clock: &Arc<LeaseClock>,
    managers: Managers,
    script: Vec<Expect>,
) -> (Action, Vec<Seen>) {
    let (client, server) = verifier::client();
    let ctx = plain_context(client, pg, cache, MemoryBucket::default())
        .with_instances(Arc::new(managers))
        .with_lease_clock(clock.clone());
    let reconcile = Box::pin(tusk::clusters::reconcile(
        Arc::new(pg.clone()),
        Arc::new(ctx),
    ));
    let work = async { reconcile.await.expect("reconcile succeeded") };
    server.play_during(script, work).await
}

/// The primary Lease as the API server returns it (never renewed since 08:00), held by
/// `holder`, with `annotations`.
pub fn lease(holder: Option<&str>, annotations: Value) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "demo-primary", "namespace": NS, "resourceVersion": "41",
                     "annotations": annotations},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 6,
                 "renewTime": "2026-11-24T08:00:00.000000Z", "leaseTransitions": 0},
    })
}

/// A read of the primary Lease, answered with [`lease`].
pub fn read_lease(holder: Option<&str>, annotations: Value) -> Expect {
    let lease = lease(holder, annotations);
    Expect::new(Method::GET, format!("{LEASES}/demo-primary"), move |_| {
        (StatusCode::OK, lease)
    })
}

/// An update of the primary Lease, answered with what was written.
pub fn write_lease() -> Expect {
    Expect::new(Method::PUT, format!("{LEASES}/demo-primary"), |body| {
        (StatusCode::OK, body.clone())
    })
}
