//! Mock-API scenarios pinning the calls of a requested switchover: the holder is asked on the
//! Lease, the Lease is handed to the target only once the target replayed past the old
//! primary's final LSN, the request annotation is removed when it is carried out, refused or
//! abandoned, and each step leaves an Event.

mod support;

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use support::paths::{CLUSTER, PODS, RO_SLICE, RW_SLICE, STATUS};
use support::read::event_reason;
use support::replicas::{self, Managers, managers, read_lease, three_instances, three_pods};
use support::verifier::{Expect, Seen};
use support::world::*;
use tusk::PostgreSQL;
use tusk::runtime::instances::LeaseClock;

const REQUEST: &str = "tusk.dev/switchover-to";

/// A Ready three-instance cluster, demo-0 primary, asked to switch over to demo-1; `started`:
/// a switchover is already recorded in its status.
fn requested(started: bool) -> (PostgreSQL, Cache) {
    let (mut pg, mut cache) = three_instances(3);
    cache.set_pods(&pg, three_pods(true));
    pg.metadata
        .annotations
        .get_or_insert_default()
        .insert(REQUEST.into(), "demo-1".into());
    if started && let Some(status) = pg.status.as_mut() {
        status.target_primary = Some("demo-1".into());
    }
    (pg, cache)
}

/// The Lease's annotations once demo-0 was asked to hand over to demo-1 `ago` seconds ago,
/// and, with `final_lsn`, after demo-0 released it.
fn asked(ago: i64, final_lsn: Option<&str>) -> Value {
    let started = Timestamp::now() - SignedDuration::from_secs(ago);
    let mut annotations = json!({
        "tusk.dev/instances": "demo-0,demo-1,demo-2",
        "tusk.dev/switchover-to": "demo-1", "tusk.dev/switchover-from": "demo-0",
        "tusk.dev/switchover-started": started.to_string(),
    });
    if let Some(lsn) = final_lsn {
        annotations["tusk.dev/final-lsn"] = lsn.into();
    }
    annotations
}

/// The merge patch removing the request.
fn clear_request() -> Expect {
    Expect::patch_cluster(CLUSTER)
}

async fn reconcile(
    pg: &PostgreSQL,
    cache: Cache,
    managers: Managers,
    script: Vec<Expect>,
) -> (Action, Vec<Seen>) {
    let clock = Arc::new(LeaseClock::default());
    replicas::reconcile(pg, cache, &clock, managers, script).await
}

fn no_switchover_annotations(lease: &Value) {
    let annotations = lease["metadata"]["annotations"]
        .as_object()
        .expect("annotations");
    let left: Vec<&String> = annotations
        .keys()
        .filter(|k| k.contains("switchover") || k.contains("final-lsn"))
        .collect();
    assert!(
        left.is_empty(),
        "switchover annotations left on the Lease: {left:?}"
    );
}

#[tokio::test]
async fn a_switchover_asks_the_holder_then_hands_over_once_the_target_replayed_the_final_wal() {
    // 1. Asked on the Lease, with who, from whom and when; the status names the target.
    let (pg, cache) = requested(false);
    let script = vec![
        read_lease(
            Some("demo-0"),
            json!({"tusk.dev/instances": "demo-0,demo-1,demo-2"}),
        ),
        replicas::write_lease(),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (action, seen) = reconcile(&pg, cache, managers("0/5000000", "0/5000000"), script).await;
    let annotations = &seen[1].body["metadata"]["annotations"];
    assert_eq!(annotations["tusk.dev/switchover-to"], "demo-1");
    assert_eq!(annotations["tusk.dev/switchover-from"], "demo-0");
    assert!(annotations["tusk.dev/switchover-started"].is_string());
    assert_eq!(
        seen[1].body["spec"]["holderIdentity"], "demo-0",
        "asked, not taken"
    );
    assert_eq!(seen[1].body["metadata"]["resourceVersion"], "41");
    assert_eq!(seen[2].body["status"]["targetPrimary"], "demo-1");
    assert_eq!(event_reason(&seen[3]), "SwitchoverStarted");
    assert_eq!(action, Action::requeue(Duration::from_millis(200)));

    // 2. Released at 0/5000028, but demo-1 replayed only up to it: nothing is written.
    let (pg, mut cache) = requested(true);
    cache.set_pods(&pg, three_pods(false));
    let script = vec![
        read_lease(None, asked(1, Some("0/5000028"))),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (action, seen) = reconcile(&pg, cache, managers("0/5000028", "0/5000000"), script).await;
    assert_eq!(seen[1].body["status"]["targetPrimary"], "demo-1");
    // The released primary's pod does not serve: 2/3 ready, as its pod says.
    assert_eq!(event_reason(&seen[2]), "NotReady");
    assert_eq!(action, Action::requeue(Duration::from_millis(200)));

    // 3. Past it: the Lease goes to demo-1, the labels follow, the status records it, and only
    //    then is the request removed (a patch before would make the status write stale).
    let (pg, mut cache) = requested(true);
    cache.set_pods(&pg, three_pods(false));
    let script = vec![
        read_lease(None, asked(1, Some("0/5000028"))),
        replicas::write_lease(),
        Expect::apply(format!("{PODS}/demo-0")),
        Expect::apply(format!("{PODS}/demo-1")),
        Expect::apply(RW_SLICE),
        Expect::apply(RO_SLICE),
        Expect::apply_status(STATUS),
        clear_request(),
        Expect::event(NS),
        // demo-0, released, does not serve until it follows demo-1.
        Expect::event(NS),
    ];
    let (_, seen) = reconcile(&pg, cache, managers("0/5000100", "0/5000000"), script).await;
    let handed = &seen[1].body;
    assert_eq!(handed["spec"]["holderIdentity"], "demo-1");
    assert_eq!(handed["spec"]["leaseTransitions"], 1);
    no_switchover_annotations(handed);
    assert_eq!(
        seen[2].body["metadata"]["labels"]["tusk.dev/role"],
        "replica"
    );
    assert_eq!(
        seen[3].body["metadata"]["labels"]["tusk.dev/role"],
        "primary"
    );
    assert_eq!(seen[4].body["endpoints"][0]["targetRef"]["name"], "demo-1");
    // The new primary leaves `-ro` in the same reconcile (demo-0 is not Ready: not in it).
    assert_eq!(seen[5].body["endpoints"][0]["targetRef"]["name"], "demo-2");
    let status = &seen[6].body["status"];
    assert_eq!(status["currentPrimary"], "demo-1");
    assert_eq!(status["targetPrimary"], Value::Null);
    assert_eq!(status["lastFailover"]["reason"], "Switchover");
    assert_eq!(status["lastFailover"]["from"], "demo-0");
    assert_eq!(seen[7].method, Method::PATCH);
    assert_eq!(
        seen[7].body["metadata"]["annotations"][REQUEST],
        Value::Null
    );
    assert_eq!(event_reason(&seen[8]), "SwitchedOver");
    assert_eq!(event_reason(&seen[9]), "NotReady");
}

#[tokio::test]
async fn a_switchover_to_a_replica_that_does_not_stream_is_refused() {
    let (pg, cache) = requested(false);
    let mut lagging = managers("0/5000000", "0/5000000");
    lagging.0[0].1.wal_receiver = Some("stopped".into());
    let script = vec![
        read_lease(Some("demo-0"), json!({})),
        Expect::apply_status(STATUS),
        clear_request(),
        Expect::event(NS),
    ];
    let (_, seen) = reconcile(&pg, cache, lagging, script).await;
    assert_eq!(seen[1].body["status"]["currentPrimary"], "demo-0");
    assert_eq!(event_reason(&seen[3]), "SwitchoverRejected");
}

#[tokio::test(start_paused = true)]
async fn a_target_that_never_catches_up_gives_the_lease_back_to_the_old_primary() {
    let (pg, mut cache) = requested(true);
    cache.set_pods(&pg, three_pods(false));
    // The timeout runs on the operator's own clock, from when it first saw the switchover (the
    // start on the Lease, 40 s ago by another host's clock, does not count).
    let clock = Arc::new(LeaseClock::default());
    let waiting = vec![
        read_lease(None, asked(40, Some("0/5000028"))),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (action, _) = replicas::reconcile(
        &pg,
        cache.clone(),
        &clock,
        managers("0/5000000", "0/5000000"),
        waiting,
    )
    .await;
    assert_eq!(
        action,
        Action::requeue(std::time::Duration::from_millis(200))
    );
    tokio::time::advance(std::time::Duration::from_secs(31)).await;
    let script = vec![
        read_lease(None, asked(71, Some("0/5000028"))),
        replicas::write_lease(),
        Expect::apply_status(STATUS),
        clear_request(),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let (_, seen) = replicas::reconcile(
        &pg,
        cache,
        &clock,
        managers("0/5000000", "0/5000000"),
        script,
    )
    .await;
    let given_back = &seen[1].body;
    assert_eq!(given_back["spec"]["holderIdentity"], "demo-0");
    no_switchover_annotations(given_back);
    let status = &seen[2].body["status"];
    assert_eq!(status["currentPrimary"], "demo-0");
    assert_eq!(status["targetPrimary"], Value::Null);
    assert_eq!(event_reason(&seen[4]), "SwitchoverAborted");
    assert_eq!(event_reason(&seen[5]), "NotReady", "demo-0 not serving yet");
}
