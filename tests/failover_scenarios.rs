//! Mock-API scenarios pinning the calls of a failover: the Lease is read while its holder's pod
//! does not serve, handed over only once it went unrenewed for its whole duration, and the role
//! labels move so that `-rw` never routes to two instances.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::paths::{PODS, RO_SLICE, RW_SLICE, STATUS};
use support::read::event_reason;
use support::replicas::{self, managers, three_instances, three_instances_of, three_pods};
use support::verifier::{Expect, Seen};
use support::world::*;
use tusk::PostgreSQL;
use tusk::runtime::instances::LeaseClock;

/// The primary Lease held by demo-0, never renewed again.
fn read_lease() -> Expect {
    replicas::read_lease(Some("demo-0"), serde_json::json!({}))
}

/// A Ready three-instance cluster whose primary, demo-0, just became unready.
fn lost_primary() -> (PostgreSQL, Cache) {
    let (pg, mut cache) = three_instances(2);
    cache.set_pods(&pg, three_pods(false));
    (pg, cache)
}

/// The calls of a failover from demo-0 to `to`: demo-0 loses its label (`-rw` routes nowhere
/// already: its pod is not ready), the Lease is handed over, `to` is labelled, `-rw` routes to
/// it and `-ro` no longer does, then the status and two Events.
fn handover_to(to: &str) -> Vec<Expect> {
    vec![
        read_lease(),
        Expect::apply(format!("{PODS}/demo-0")),
        replicas::write_lease(),
        Expect::apply(format!("{PODS}/{to}")),
        Expect::apply(RW_SLICE),
        Expect::apply(RO_SLICE),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ]
}

/// One reconcile with demo-2 the most advanced replica.
async fn reconcile(
    pg: &PostgreSQL,
    cache: Cache,
    clock: &Arc<LeaseClock>,
    script: Vec<Expect>,
) -> (kube::runtime::controller::Action, Vec<Seen>) {
    replicas::reconcile(pg, cache, clock, managers("0/5000000", "0/6000000"), script).await
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
    let script = handover_to("demo-2");
    let (_, seen) = reconcile(&pg, cache, &clock, script).await;
    assert_eq!(
        seen[1].body["metadata"]["labels"]["tusk.dev/role"],
        "replica"
    );
    let handed = &seen[2].body;
    assert_eq!(handed["spec"]["holderIdentity"], "demo-2");
    assert_eq!(handed["spec"]["leaseTransitions"], 1);
    // Where the standbys now dial: the new holder's pod IP, before its first renew.
    assert_eq!(
        handed["metadata"]["annotations"]["tusk.dev/holder-address"],
        "demo-2=10.0.0.12"
    );
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
    let routed = &seen[4].body["endpoints"][0];
    assert_eq!(routed["addresses"], serde_json::json!(["10.0.0.12"]));
    assert_eq!(routed["targetRef"]["name"], "demo-2");
    // `-ro` drops the new primary in the same reconcile: no read-only client lands on it.
    let readers = &seen[5].body["endpoints"];
    assert_eq!(readers.as_array().map(Vec::len), Some(1), "{readers}");
    assert_eq!(readers[0]["targetRef"]["name"], "demo-1");
    assert_eq!(event_reason(&seen[7]), "FailedOver");
    let status = &seen[6].body["status"];
    assert_eq!(status["currentPrimary"], "demo-2");
    assert_eq!(status["lastFailover"]["from"], "demo-0");
    assert_eq!(status["lastFailover"]["to"], "demo-2");
    assert_eq!(status["lastFailover"]["reason"], "PrimaryLost");
    // The same record on the Lease, in the write that hands it over.
    let recorded = handed["metadata"]["annotations"]["tusk.dev/last-failover"]
        .as_str()
        .expect("the handover's record on the Lease");
    let recorded: serde_json::Value = serde_json::from_str(recorded).expect("JSON");
    assert_eq!(recorded, status["lastFailover"]);
}

/// The reconcile that handed the Lease over did not get its status written (a later step
/// failed, or it started from a stale copy): the next one, finding the Lease with another
/// holder, records the handover from the Lease, with its Event, instead of losing it.
#[tokio::test]
async fn a_handover_whose_status_was_not_written_is_recorded_from_the_lease() {
    let (pg, cache) = lost_primary();
    let clock = Arc::new(LeaseClock::default());
    let record = serde_json::json!({"from": "demo-0", "to": "demo-2", "reason": "PrimaryLost",
        "at": "2026-11-24T10:00:00Z", "seconds": 6.5});
    let script = vec![
        replicas::read_lease(
            Some("demo-2"),
            serde_json::json!({"tusk.dev/last-failover": record.to_string()}),
        ),
        Expect::apply(format!("{PODS}/demo-0")),
        Expect::apply(format!("{PODS}/demo-2")),
        Expect::apply(RW_SLICE),
        Expect::apply(RO_SLICE),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let (_, seen) = reconcile(&pg, cache, &clock, script).await;
    assert_eq!(seen[3].body["endpoints"][0]["targetRef"]["name"], "demo-2");
    let status = &seen[5].body["status"];
    assert_eq!(status["currentPrimary"], "demo-2");
    assert_eq!(status["lastFailover"], record);
    let reasons: Vec<_> = seen[6..].iter().map(event_reason).collect();
    assert!(reasons.contains(&"FailedOver"), "{reasons:?}");
}

#[tokio::test(start_paused = true)]
async fn no_replica_answering_blocks_the_failover_with_a_warning() {
    let (pg, mut cache) = lost_primary();
    let mut pods = cache.pods.clone();
    for pod in &mut pods {
        // No IP: nothing to ask, so nothing can be promoted (and `-rw` routes nowhere).
        if let Some(status) = pod.status.as_mut() {
            status.pod_ip = None;
        }
    }
    cache.set_pods(&pg, pods);
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

/// `ANY 1` of two standbys with only demo-1 answering (demo-2 has no IP): `required` cannot be
/// sure demo-1 confirmed the last commits and waits; `preferred` promotes demo-1.
#[tokio::test(start_paused = true)]
async fn preferred_durability_promotes_the_one_answering_replica_where_required_waits() {
    let watch_only = || {
        vec![
            read_lease(),
            Expect::apply_status(STATUS),
            Expect::event(NS),
        ]
    };
    for durability in ["required", "preferred"] {
        let spec = format!(
            "instances: 3\nstorage: {{size: 1Gi}}\n\
             replication: {{synchronous: {{number: 1, durability: {durability}}}}}"
        );
        let (pg, mut cache) = three_instances_of(&spec, 2);
        let mut pods = three_pods(false);
        if let Some(status) = pods[2].status.as_mut() {
            status.pod_ip = None;
        }
        cache.set_pods(&pg, pods);
        let clock = Arc::new(LeaseClock::default());
        reconcile(&pg, cache.clone(), &clock, watch_only()).await;
        tokio::time::advance(Duration::from_secs(7)).await;
        if durability == "required" {
            let mut script = watch_only();
            script.push(Expect::event(NS));
            let (_, seen) = reconcile(&pg, cache, &clock, script).await;
            assert_eq!(seen[1].body["status"]["currentPrimary"], "demo-0");
            assert_eq!(event_reason(&seen[2]), "FailoverBlocked");
            continue;
        }
        let script = handover_to("demo-1");
        let (_, seen) = reconcile(&pg, cache, &clock, script).await;
        assert_eq!(seen[2].body["spec"]["holderIdentity"], "demo-1");
        assert_eq!(seen[6].body["status"]["currentPrimary"], "demo-1");
        assert_eq!(event_reason(&seen[7]), "FailedOver");
    }
}

#[tokio::test]
async fn a_serving_primary_costs_one_lease_read_and_no_write() {
    let (pg, mut cache) = three_instances(3);
    cache.set_pods(&pg, three_pods(true));
    let clock = Arc::new(LeaseClock::default());
    // The Lease is read (the labels follow it, not the status) and the status written (the
    // instances appear in it); no label write, no Lease write.
    let script = vec![read_lease(), Expect::apply_status(STATUS)];
    let (_, seen) = reconcile(&pg, cache, &clock, script).await;
    let instances = &seen[1].body["status"]["instanceStates"];
    assert_eq!(instances[0]["pod"], "demo-0");
    assert_eq!(instances[0]["role"], "primary");
    assert_eq!(instances[2]["role"], "replica");
}
