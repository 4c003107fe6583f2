//! Mock-API scenarios of the states faults leave behind, on the operator's side: a failover must
//! not wait for unrelated steps, the role labels follow the Lease (not a status that missed a
//! handover), a quorum counts only replicas that can be ranked, a lost 409 leaves `-rw` routed,
//! a switchover recorded only on the Lease is carried on, the Lease's own duration is not
//! trusted, and a holder that renews without serving is asked to let go.

mod support;

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use support::memory_store::MemoryBucket;
use support::paths::{LEASES, PODS, RO_SLICE, RW_SLICE, STATEFULSETS, STATUS};
use support::read::event_reason;
use support::replicas::{self, Managers, managers, replica, three_instances_of, three_pods};
use support::verifier::{self, Expect, Seen};
use support::world::*;
use tusk::PostgreSQL;
use tusk::runtime::instances::LeaseClock;

const THREE: &str = "instances: 3\nstorage: {size: 1Gi}";

/// One reconcile that may fail (the scripted API server refuses a write): its result and every
/// request seen.
async fn reconcile(
    pg: &PostgreSQL,
    cache: Cache,
    clock: &Arc<LeaseClock>,
    managers: Managers,
    script: Vec<Expect>,
) -> (tusk::error::Result<Action>, Vec<Seen>) {
    let (client, server) = verifier::client();
    let ctx = plain_context(client, pg, cache, MemoryBucket::default())
        .with_instances(Arc::new(managers))
        .with_lease_clock(clock.clone());
    let reconcile = Box::pin(tusk::clusters::reconcile(
        Arc::new(pg.clone()),
        Arc::new(ctx),
    ));
    server.play_during(script, reconcile).await
}

/// The primary Lease, never renewed since 08:00, held by `holder`, at `version`, with
/// `annotations` and `duration` seconds.
fn lease_at(holder: &str, version: &str, duration: i64, annotations: Value) -> Expect {
    let mut lease = replicas::lease(Some(holder), annotations);
    lease["metadata"]["resourceVersion"] = json!(version);
    lease["spec"]["leaseDurationSeconds"] = json!(duration);
    Expect::new(Method::GET, format!("{LEASES}/demo-primary"), move |_| {
        (StatusCode::OK, lease)
    })
}

/// demo-0's Lease, as the first holder wrote the cluster's system identifier on it.
fn bootstrapped_lease(holder: &str) -> Expect {
    lease_at(
        holder,
        "41",
        6,
        json!({"tusk.dev/system-identifier": "7401"}),
    )
}

/// A write the API server refuses (a ResourceQuota, an admission policy).
fn refused(method: Method, path: String) -> Expect {
    Expect::new(method, path, |_| {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "Forbidden", "code": 403,
            "message": "exceeded quota: storage, requested: requests.storage=10Gi"});
        (StatusCode::FORBIDDEN, status)
    })
}

fn paths(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .map(|s| format!("{} {}", s.method, s.path))
        .collect()
}

/// A three-instance cluster whose primary demo-0 no longer serves; its StatefulSet is missing
/// from the cache, so the reconcile applies it (and the API server refuses that).
fn lost_primary_with_a_refused_apply() -> (PostgreSQL, Cache) {
    let (pg, mut cache) = three_instances_of(THREE, 2);
    cache.set_pods(&pg, three_pods(false));
    cache.statefulsets.clear();
    (pg, cache)
}

#[tokio::test(start_paused = true)]
async fn a_refused_child_apply_does_not_hold_up_the_failover() {
    let (pg, cache) = lost_primary_with_a_refused_apply();
    let clock = Arc::new(LeaseClock::default());
    let sts = format!("{STATEFULSETS}/demo");
    let first = vec![
        bootstrapped_lease("demo-0"),
        refused(Method::PATCH, sts.clone()),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ];
    let (result, _) = reconcile(
        &pg,
        cache.clone(),
        &clock,
        managers("0/5000000", "0/6000000"),
        first,
    )
    .await;
    assert!(result.is_err(), "the refused apply fails the reconcile");
    tokio::time::advance(Duration::from_secs(7)).await;
    let second = vec![
        bootstrapped_lease("demo-0"),
        Expect::apply(format!("{PODS}/demo-0")),
        replicas::write_lease(),
        Expect::apply(format!("{PODS}/demo-2")),
        // `-rw` routes to the new primary before the refused child fails the reconcile, and
        // `-ro` stops routing to it.
        Expect::apply(RW_SLICE),
        Expect::apply(RO_SLICE),
        refused(Method::PATCH, sts),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ];
    let (result, seen) = reconcile(
        &pg,
        cache,
        &clock,
        managers("0/5000000", "0/6000000"),
        second,
    )
    .await;
    assert!(result.is_err());
    assert_eq!(seen[4].body["endpoints"][0]["targetRef"]["name"], "demo-2");
    assert_eq!(
        seen[2].body["spec"]["holderIdentity"],
        "demo-2",
        "{:?}",
        paths(&seen)
    );
}

#[tokio::test(start_paused = true)]
async fn an_invalid_spec_does_not_turn_failover_off() {
    // An invalid schedule (a range CEL cannot check), after the cluster went Failed for it.
    let spec = "instances: 3\nstorage: {size: 1Gi}\nbackup:\n  schedule: '0 3 * * 5-1'\n  \
                destination: {s3: {bucket: b, endpoint: 'http://minio:9000'}}";
    let (mut pg, mut cache) = three_instances_of(THREE, 2);
    let invalid = postgresql(spec);
    pg.spec = invalid.spec;
    pg.metadata.finalizers = Some(vec![tusk::crd::CLEANUP_FINALIZER.to_owned()]);
    if let Some(status) = pg.status.as_mut() {
        status.phase = Some(tusk::crd::Phase::Failed);
        status.conditions.retain(|c| c.type_ != "Ready");
    }
    cache.set_pods(&pg, three_pods(false));
    let clock = Arc::new(LeaseClock::default());
    let watch = vec![
        bootstrapped_lease("demo-0"),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (result, _) = reconcile(
        &pg,
        cache.clone(),
        &clock,
        managers("0/5000000", "0/6000000"),
        watch,
    )
    .await;
    assert_eq!(
        result.expect("an invalid spec is not an error"),
        Action::requeue(Duration::from_secs(1)),
        "the lost primary is looked at again, not left until the spec changes"
    );
    tokio::time::advance(Duration::from_secs(7)).await;
    let script = vec![
        bootstrapped_lease("demo-0"),
        Expect::apply(format!("{PODS}/demo-0")),
        replicas::write_lease(),
        Expect::apply(format!("{PODS}/demo-2")),
        Expect::apply(RW_SLICE),
        Expect::apply(RO_SLICE),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let (_, seen) = reconcile(
        &pg,
        cache,
        &clock,
        managers("0/5000000", "0/6000000"),
        script,
    )
    .await;
    assert_eq!(seen[2].body["spec"]["holderIdentity"], "demo-2");
    // Routed with the spec invalid too: the refusal is no reason to keep clients away.
    assert_eq!(seen[4].body["endpoints"][0]["targetRef"]["name"], "demo-2");
    let status = &seen[6].body["status"];
    assert_eq!(status["currentPrimary"], "demo-2");
    assert_eq!(status["systemIdentifier"], "7401");
    let ready = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(ready["reason"], "InvalidSpec", "still reported");
    let reasons: Vec<_> = seen[7..].iter().map(event_reason).collect();
    assert_eq!(reasons, ["InvalidSpec", "FailedOver"]);
}

#[tokio::test]
async fn the_role_labels_follow_the_lease_when_the_status_missed_a_handover() {
    // demo-2 holds the Lease; the status write of that handover was lost, and demo-0, rejoined
    // as a replica and ready, still carries the primary label.
    let (pg, mut cache) = three_instances_of(THREE, 3);
    cache.set_pods(&pg, three_pods(true));
    let clock = Arc::new(LeaseClock::default());
    let script = vec![
        bootstrapped_lease("demo-2"),
        Expect::apply(format!("{PODS}/demo-0")),
        Expect::apply(format!("{PODS}/demo-2")),
        Expect::apply(RW_SLICE),
        Expect::apply(RO_SLICE),
        Expect::apply_status(STATUS),
    ];
    let (result, seen) = reconcile(
        &pg,
        cache,
        &clock,
        managers("0/5000000", "0/6000000"),
        script,
    )
    .await;
    result.expect("reconciled");
    assert_eq!(
        seen[1].body["metadata"]["labels"]["tusk.dev/role"],
        "replica"
    );
    assert_eq!(
        seen[2].body["metadata"]["labels"]["tusk.dev/role"],
        "primary"
    );
    assert_eq!(
        seen[3].body["endpoints"][0]["addresses"],
        json!(["10.0.0.12"])
    );
    let readers = seen[4].body["endpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let readers: Vec<_> = readers
        .iter()
        .map(|e| e["targetRef"]["name"].clone())
        .collect();
    assert_eq!(
        readers,
        [json!("demo-0"), json!("demo-1")],
        "the rejoined one reads"
    );
    assert_eq!(seen[5].body["status"]["currentPrimary"], "demo-2");
}

#[tokio::test(start_paused = true)]
async fn a_handover_that_loses_its_conflict_puts_the_primary_label_back() {
    let (pg, mut cache) = three_instances_of(THREE, 2);
    cache.set_pods(&pg, three_pods(false));
    let clock = Arc::new(LeaseClock::default());
    let watch = vec![
        bootstrapped_lease("demo-0"),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    reconcile(
        &pg,
        cache.clone(),
        &clock,
        managers("0/5000000", "0/6000000"),
        watch,
    )
    .await
    .0
    .expect("watched");
    tokio::time::advance(Duration::from_secs(7)).await;
    let conflict = Expect::new(Method::PUT, format!("{LEASES}/demo-primary"), |_| {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "Conflict", "code": 409, "message": "the object has been modified"});
        (StatusCode::CONFLICT, status)
    });
    let script = vec![
        bootstrapped_lease("demo-0"),
        Expect::apply(format!("{PODS}/demo-0")),
        conflict,
        // The holder renewed after all: it gets its label back in the same reconcile (`-rw`
        // stays empty while its pod is not ready).
        Expect::apply(format!("{PODS}/demo-0")),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (result, seen) = reconcile(
        &pg,
        cache,
        &clock,
        managers("0/5000000", "0/6000000"),
        script,
    )
    .await;
    assert_eq!(result.expect("reconciled"), Action::requeue(Duration::ZERO));
    assert_eq!(
        seen[1].body["metadata"]["labels"]["tusk.dev/role"],
        "replica"
    );
    assert_eq!(
        seen[3].body["metadata"]["labels"]["tusk.dev/role"],
        "primary"
    );
}

#[tokio::test(start_paused = true)]
async fn a_required_quorum_counts_only_replicas_that_answer_for_themselves_with_positions() {
    // ANY 1 of two standbys: both must answer. demo-1 answers; what answers at demo-2's IP says
    // it is demo-1 (a reused IP), and a third report has no positions: neither counts.
    let spec = "instances: 3\nstorage: {size: 1Gi}\n\
                replication: {synchronous: {number: 1, durability: required}}";
    let (pg, mut cache) = three_instances_of(spec, 2);
    cache.set_pods(&pg, three_pods(false));
    let clock = Arc::new(LeaseClock::default());
    let impostor = || {
        let mut wrong = replica("demo-1", "0/9000000");
        wrong.timeline = Some(1);
        Managers(vec![
            ("10.0.0.11", replica("demo-1", "0/5000000")),
            ("10.0.0.12", wrong),
        ])
    };
    let watch = || {
        vec![
            bootstrapped_lease("demo-0"),
            Expect::apply_status(STATUS),
            Expect::event(NS),
        ]
    };
    reconcile(&pg, cache.clone(), &clock, impostor(), watch())
        .await
        .0
        .expect("watched");
    tokio::time::advance(Duration::from_secs(7)).await;
    let mut script = watch();
    script.push(Expect::event(NS));
    let (_, seen) = reconcile(&pg, cache.clone(), &clock, impostor(), script).await;
    assert_eq!(
        event_reason(&seen[2]),
        "FailoverBlocked",
        "{:?}",
        paths(&seen)
    );
    let unknown = || {
        let mut blind = replica("demo-2", "0/6000000");
        blind.lsn = Default::default();
        Managers(vec![
            ("10.0.0.11", replica("demo-1", "0/5000000")),
            ("10.0.0.12", blind),
        ])
    };
    let mut script = watch();
    script.push(Expect::event(NS));
    let (_, seen) = reconcile(&pg, cache, &clock, unknown(), script).await;
    assert_eq!(
        event_reason(&seen[2]),
        "FailoverBlocked",
        "{:?}",
        paths(&seen)
    );
}

#[tokio::test(start_paused = true)]
async fn a_scale_down_with_the_primary_on_a_removed_ordinal_counts_every_standby() {
    // instances 3 -> 2 while demo-2 was primary and is lost: demo-0 and demo-1 are both
    // standbys that may hold the last commits (ANY 1), so both must answer.
    let spec = "instances: 2\nstorage: {size: 1Gi}\n\
                replication: {synchronous: {number: 1, durability: required}}";
    let (pg, mut cache) = three_instances_of(spec, 2);
    cache.set_pods(
        &pg,
        vec![
            replicas::pod("demo-0", "replica", true, "10.0.0.10"),
            replicas::pod("demo-1", "replica", true, "10.0.0.11"),
            replicas::pod("demo-2", "primary", false, "10.0.0.12"),
        ],
    );
    let mut pg = pg;
    if let Some(status) = pg.status.as_mut() {
        status.current_primary = Some("demo-2".into());
        status.instances = 2;
    }
    let only_demo_1 = || Managers(vec![("10.0.0.11", replica("demo-1", "0/5000000"))]);
    let clock = Arc::new(LeaseClock::default());
    let watch = || {
        vec![
            bootstrapped_lease("demo-2"),
            // The StatefulSet keeps the removed ordinal while it holds the Lease.
            Expect::apply(format!("{STATEFULSETS}/demo")),
            Expect::event(NS),
            Expect::apply_status(STATUS),
            Expect::event(NS),
        ]
    };
    reconcile(&pg, cache.clone(), &clock, only_demo_1(), watch())
        .await
        .0
        .expect("watched");
    tokio::time::advance(Duration::from_secs(7)).await;
    let mut script = watch();
    script.push(Expect::event(NS));
    let (_, seen) = reconcile(&pg, cache, &clock, only_demo_1(), script).await;
    let reasons: Vec<_> = seen[4..].iter().map(event_reason).collect();
    assert!(reasons.contains(&"FailoverBlocked"), "{reasons:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lease_that_claims_a_one_second_duration_is_still_given_six() {
    let (pg, mut cache) = three_instances_of(THREE, 2);
    cache.set_pods(&pg, three_pods(false));
    let clock = Arc::new(LeaseClock::default());
    let short = || {
        lease_at(
            "demo-0",
            "41",
            1,
            json!({"tusk.dev/system-identifier": "7401"}),
        )
    };
    let watch = || vec![short(), Expect::apply_status(STATUS), Expect::event(NS)];
    reconcile(
        &pg,
        cache.clone(),
        &clock,
        managers("0/5000000", "0/6000000"),
        watch(),
    )
    .await
    .0
    .expect("watched");
    tokio::time::advance(Duration::from_secs(2)).await;
    // Two seconds unrenewed: within the compiled-in six, so no handover yet.
    let (action, seen) = reconcile(
        &pg,
        cache,
        &clock,
        managers("0/5000000", "0/6000000"),
        watch(),
    )
    .await;
    assert_eq!(
        action.expect("watched"),
        Action::requeue(Duration::from_secs(1))
    );
    assert_eq!(seen.len(), 3, "{:?}", paths(&seen));
}

#[tokio::test(start_paused = true)]
async fn a_switchover_recorded_only_on_the_lease_is_carried_on() {
    // The status write that recorded targetPrimary was lost and the request annotation is gone;
    // the holder never released (it died uncleanly): the switchover is followed from the Lease,
    // times out on the operator's own clock and is aborted, so the holder runs as primary again.
    let (pg, mut cache) = three_instances_of(THREE, 2);
    cache.set_pods(&pg, three_pods(false));
    let annotations = json!({"tusk.dev/system-identifier": "7401",
        "tusk.dev/switchover-to": "demo-1", "tusk.dev/switchover-from": "demo-0",
        "tusk.dev/switchover-started": "2026-11-24T08:00:00Z"});
    let clock = Arc::new(LeaseClock::default());
    let script = vec![
        lease_at("demo-0", "41", 6, annotations.clone()),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (result, seen) = reconcile(
        &pg,
        cache.clone(),
        &clock,
        managers("0/5000000", "0/6000000"),
        script,
    )
    .await;
    assert_eq!(
        result.expect("reconciled"),
        Action::requeue(Duration::from_millis(200))
    );
    assert_eq!(
        seen[1].body["status"]["targetPrimary"], "demo-1",
        "followed from the Lease"
    );
    tokio::time::advance(Duration::from_secs(31)).await;
    let script = vec![
        lease_at("demo-0", "41", 6, annotations),
        replicas::write_lease(),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (result, seen) = reconcile(
        &unready(&pg),
        cache,
        &clock,
        managers("0/5000000", "0/6000000"),
        script,
    )
    .await;
    result.expect("reconciled");
    let written = &seen[1].body["metadata"]["annotations"];
    assert!(written.get("tusk.dev/switchover-to").is_none(), "{written}");
    assert_eq!(event_reason(&seen[3]), "SwitchoverAborted");
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_renews_without_serving_is_asked_to_release_the_lease() {
    let (pg, mut cache) = three_instances_of(THREE, 2);
    cache.set_pods(&pg, three_pods(false));
    let clock = Arc::new(LeaseClock::default());
    let sysid = json!({"tusk.dev/system-identifier": "7401"});
    // Renewed before every look (a new resourceVersion each time): never expires.
    for (i, version) in ["41", "42", "43"].into_iter().enumerate() {
        let script = vec![
            lease_at("demo-0", version, 6, sysid.clone()),
            Expect::apply_status(STATUS),
        ];
        let mut script = script;
        if i == 0 {
            script.push(Expect::event(NS));
        }
        let pg = if i == 0 { pg.clone() } else { unready(&pg) };
        let (result, seen) = reconcile(
            &pg,
            cache.clone(),
            &clock,
            managers("0/5000000", "0/6000000"),
            script,
        )
        .await;
        result.unwrap_or_else(|e| panic!("look {i}: {e} {:?}", paths(&seen)));
        tokio::time::advance(Duration::from_secs(30)).await;
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    let script = vec![
        lease_at("demo-0", "44", 6, sysid),
        replicas::write_lease(),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (result, seen) = reconcile(
        &unready(&pg),
        cache,
        &clock,
        managers("0/5000000", "0/6000000"),
        script,
    )
    .await;
    result.expect("reconciled");
    assert_eq!(
        seen[1].body["metadata"]["annotations"]["tusk.dev/release-requested"],
        "demo-0"
    );
    assert_eq!(
        seen[1].body["spec"]["holderIdentity"], "demo-0",
        "the holder is not changed"
    );
    assert_eq!(event_reason(&seen[3]), "ReleaseRequested");
}

/// `pg` as the previous look left it: not Ready any more (its NotReady Event was published).
fn unready(pg: &PostgreSQL) -> PostgreSQL {
    let mut pg = pg.clone();
    if let Some(status) = pg.status.as_mut() {
        status.phase = Some(tusk::crd::Phase::Degraded);
        for condition in &mut status.conditions {
            if condition.type_ == "Ready" {
                condition.status = "False".into();
                condition.reason = "InstancesNotReady".into();
                condition.message = "2/3 instances are ready".into();
            }
        }
        status.ready_instances = 2;
    }
    pg
}
