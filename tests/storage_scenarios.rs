//! Mock-API scenarios for storage changes: a grown `spec.storage.size` expands the claims and
//! never touches the StatefulSet's immutable claim template. (The local control plane has no
//! real volumes, so these exact requests are the proof; CEL refusals are in e2e/invalid_specs.)

mod support;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use support::memory_store::MemoryBucket;
use support::paths::STATUS;
use support::read::condition;
use support::run::reconcile_cluster;
use support::verifier::Expect;
use support::world::*;
use tusk::clusters::status::BackupSchedule;

const CLAIM: &str = "/api/v1/namespaces/prod/persistentvolumeclaims/data-demo-0";
const CLASS: &str = "/apis/storage.k8s.io/v1/storageclasses/standard";

fn claim(size: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-demo-0", "namespace": NS},
        "spec": {"storageClassName": "standard", "resources": {"requests": {"storage": size}}},
        "status": {"capacity": {"storage": "1Gi"}}})
}

fn class(expandable: bool) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "standard"}, "provisioner": "example.com/disk",
        "allowVolumeExpansion": expandable})
}

fn answer(body: Value) -> impl FnOnce(&Value) -> (StatusCode, Value) + Send + 'static {
    move |_| (StatusCode::OK, body)
}

/// A Ready 1Gi cluster whose spec now asks for 5Gi.
fn grown() -> (tusk::PostgreSQL, Cache) {
    let (mut pg, cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    pg.spec.storage.size = "5Gi".into();
    (pg, cache)
}

/// The operator reads the 1Gi claim and its class before deciding how to grow it.
fn claim_and_class_read(expandable: bool) -> Vec<Expect> {
    vec![
        Expect::new(Method::GET, CLAIM, answer(claim("1Gi"))),
        Expect::new(Method::GET, CLASS, answer(class(expandable))),
    ]
}

#[tokio::test]
async fn a_grown_size_expands_the_claim_and_leaves_the_statefulset_alone() {
    let (pg, cache) = grown();
    // No StatefulSet request: its claim template stays as created (the API server refuses
    // any change to it, which used to fail every reconcile with ApplyFailed).
    let mut script = claim_and_class_read(true);
    script.extend([
        Expect::new(Method::PATCH, CLAIM, answer(claim("5Gi"))),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ]);
    let (result, seen) = reconcile_cluster(pg, cache, MemoryBucket::default(), script).await;
    result.expect("reconcile succeeded");
    assert_eq!(
        seen[2].body,
        json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}})
    );
    assert_eq!(
        seen[3].body["note"],
        "Updated PersistentVolumeClaim data-demo-0"
    );
    let resized = condition(&seen[4].body, "StorageResized");
    assert_eq!(resized["status"], "False");
    assert_eq!(resized["reason"], "Resizing");
    assert_eq!(resized["message"], "expanding data-demo-0 to 5Gi");
    assert_eq!(condition(&seen[4].body, "Ready")["status"], "True");
}

#[tokio::test]
async fn a_class_that_cannot_expand_is_a_false_condition_and_a_warning() {
    let (pg, cache) = grown();
    let mut script = claim_and_class_read(false);
    script.extend([Expect::apply_status(STATUS), Expect::event(NS)]);
    let (result, seen) = reconcile_cluster(pg, cache, MemoryBucket::default(), script).await;
    result.expect("reconcile succeeded");
    let resized = condition(&seen[2].body, "StorageResized");
    assert_eq!(resized["status"], "False");
    assert_eq!(resized["reason"], "ExpansionNotSupported");
    assert_eq!(
        resized["message"],
        "StorageClass standard of claim data-demo-0 does not allow volume expansion \
         (allowVolumeExpansion is not true), so spec.storage.size 5Gi cannot take effect"
    );
    assert_eq!(seen[3].body["type"], "Warning");
    assert_eq!(seen[3].body["reason"], "ExpansionNotSupported");
}
