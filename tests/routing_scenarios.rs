//! Mock-API scenarios pinning the client Services' routing: the operator's EndpointSlices follow
//! the primary pod (`-rw`) and the instances' readiness (`-ro`, `-r`), and a Service of an
//! earlier Tusk (routed by a selector) moves over once, without leaving kube-controller-manager's
//! objects naming pods of the past.

mod support;

use http::{Method, StatusCode};
use serde_json::json;
use std::sync::Arc;
use support::paths::{ANY_SLICE, RO_SLICE, RW_SLICE, SERVICES, STATUS};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use support::read::event_reason;
use support::replicas::{self, pod, three_instances, three_pods};
use support::run::scenario;
use support::verifier::{Expect, Seen};
use support::world::*;
use tusk::clusters::status::BackupSchedule;
use tusk::runtime::instances::LeaseClock;

const SINGLE: &str = "storage: {size: 1Gi}";

/// The Lease, held by demo-0.
fn holder() -> Expect {
    replicas::read_lease(Some("demo-0"), json!({}))
}

/// One reconcile of a three-instance cluster whose replicas are level with the primary.
async fn three(pg: &tusk::PostgreSQL, cache: Cache, script: Vec<Expect>) -> Vec<Seen> {
    let clock = Arc::new(LeaseClock::default());
    let managers = replicas::managers("0/5000000", "0/5000000");
    replicas::reconcile(pg, cache, &clock, managers, script)
        .await
        .1
}

/// A converged one-instance cluster whose `-rw` routes to its ready pod.
fn routed_cluster() -> (tusk::PostgreSQL, Cache) {
    let (pg, mut cache) = converged(SINGLE, true, BackupSchedule::NotConfigured);
    cache.set_pods(&pg, vec![pod("demo-0", "primary", true, "10.0.0.10")]);
    (pg, cache)
}

/// The cached `-rw` Service, to change as someone else did.
fn rw_of(cache: &mut Cache) -> &mut k8s_openapi::api::core::v1::Service {
    cache
        .services
        .iter_mut()
        .find(|s| s.metadata.name.as_deref() == Some("demo-rw"))
        .expect("the -rw Service")
}

/// A merge patch of `-rw`, answered with the Service as the server would return it.
fn unselect_rw() -> Expect {
    Expect::new(Method::PATCH, format!("{SERVICES}/demo-rw"), |_| {
        let service = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "demo-rw", "namespace": "prod", "resourceVersion": "2"}});
        (StatusCode::OK, service)
    })
}

#[tokio::test]
async fn a_primary_pod_with_a_new_ip_is_routed_at_its_new_address() {
    let (pg, mut cache) = converged(SINGLE, true, BackupSchedule::NotConfigured);
    cache.set_pods(&pg, vec![pod("demo-0", "primary", true, "10.0.0.10")]);
    // Recreated by the StatefulSet controller: same name, another IP.
    cache.pods = vec![pod("demo-0", "primary", true, "10.0.0.99")];
    let script = vec![
        Expect::apply(RW_SLICE),
        Expect::apply(ANY_SLICE),
        Expect::apply_status(STATUS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    assert_eq!(
        seen[1].body["endpoints"], seen[0].body["endpoints"],
        "-r too"
    );
    let slice = &seen[0].body;
    assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.0.0.99"]));
    assert_eq!(slice["endpoints"][0]["conditions"]["ready"], true);
    assert_eq!(
        slice["ports"][0]["name"], "postgres",
        "as the Service's port is named"
    );
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"], "operator.tusk.dev",
        "kube-controller-manager leaves it alone"
    );
}

#[tokio::test]
async fn an_unready_primary_is_taken_out_and_a_new_cluster_gets_its_slice_once_it_serves() {
    let (pg, mut cache) = converged(SINGLE, true, BackupSchedule::NotConfigured);
    cache.set_pods(&pg, vec![pod("demo-0", "primary", true, "10.0.0.10")]);
    cache.pods = vec![pod("demo-0", "primary", false, "10.0.0.10")];
    let script = vec![
        Expect::apply(RW_SLICE),
        Expect::apply(ANY_SLICE),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    for slice in &seen[..2] {
        assert_eq!(
            slice.body["endpoints"],
            json!([]),
            "kube-proxy routes to neither"
        );
    }
    // The pod says so before the StatefulSet's count does.
    assert_eq!(event_reason(&seen[3]), "NotReady");

    // A new cluster whose pod has an IP but does not serve yet: no slice is created empty.
    let (pg, mut cache) = converged(SINGLE, true, BackupSchedule::NotConfigured);
    cache.endpoint_slices.clear();
    cache.pods = vec![pod("demo-0", "primary", false, "10.0.0.10")];
    let script = vec![Expect::apply_status(STATUS), Expect::event(NS)];
    scenario(pg, cache, script).await;
}

#[tokio::test]
async fn a_selector_routed_rw_service_moves_to_the_operators_slice_once() {
    let (pg, mut cache) = routed_cluster();
    // As an earlier Tusk applied it: a selector on the primary's label, no annotation.
    let old = rw_of(&mut cache);
    old.metadata.annotations = None;
    if let Some(spec) = old.spec.as_mut() {
        let selector = [("tusk.dev/cluster", "demo"), ("tusk.dev/role", "primary")];
        spec.selector = Some(
            selector
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        );
    }
    // 1. The selector goes (the operator's slice already routes to the primary); the children's
    //    apply leaves the Service to the move.
    let script = vec![unselect_rw(), Expect::apply_status(STATUS)];
    let (_, seen) = scenario(pg.clone(), cache.clone(), script).await;
    // A merge patch, so a selector another field manager set goes too; the time it went noted.
    assert!(
        !seen[0].query.contains("force"),
        "not an apply: {}",
        seen[0].query
    );
    let noted = seen[0].body["metadata"]["annotations"]["tusk.dev/unselected-at"].clone();
    assert!(
        noted
            .as_str()
            .is_some_and(|at| at.parse::<Timestamp>().is_ok()),
        "{noted}"
    );
    assert_eq!(
        seen[0].body,
        json!({"metadata": {"annotations": {"tusk.dev/endpoints": null,
                                            "tusk.dev/unselected-at": noted}},
               "spec": {"selector": null}})
    );

    // 2. Later reconciles, their cache showing no selector: what kube-controller-manager kept
    //    for it goes in every one (a sync it began before would re-create a slice)...
    let rw_service = rw_of(&mut cache);
    if let Some(spec) = rw_service.spec.as_mut() {
        spec.selector = None;
    }
    rw_service.metadata.annotations = Some(
        [(
            "tusk.dev/unselected-at".to_owned(),
            Timestamp::now().to_string(),
        )]
        .into(),
    );
    let clear = || {
        [
            Expect::delete("/api/v1/namespaces/prod/endpoints/demo-rw"),
            Expect::delete("/apis/discovery.k8s.io/v1/namespaces/prod/endpointslices"),
        ]
    };
    let mut script = Vec::from(clear());
    script.push(Expect::apply_status(STATUS));
    let (_, seen) = scenario(pg.clone(), cache.clone(), script).await;
    let foreign = &seen[1].query;
    assert!(
        foreign.contains("kubernetes.io%2Fservice-name%3Ddemo-rw")
            && foreign.contains("endpointslice.kubernetes.io%2Fmanaged-by%21%3Doperator.tusk.dev"),
        "only -rw's slices that are not the operator's: {foreign}"
    );

    // 3. ...and once the settle has passed, a last time, then the annotation that ends the move.
    let long_ago = "2026-01-01T00:00:00Z".to_owned();
    rw_of(&mut cache).metadata.annotations =
        Some([("tusk.dev/unselected-at".to_owned(), long_ago)].into());
    let mut script = Vec::from(clear());
    script.extend([unselect_rw(), Expect::apply_status(STATUS)]);
    let (_, seen) = scenario(pg, cache, script).await;
    assert_eq!(
        seen[2].body,
        json!({"metadata": {"annotations": {"tusk.dev/endpoints": "operator",
                                            "tusk.dev/unselected-at": null}}})
    );
}

/// A selector added to a moved `-rw` by hand (kube-controller-manager would route to whatever it
/// selects) is removed the same way, and what that controller made of it after.
#[tokio::test]
async fn a_selector_added_by_hand_is_removed() {
    let (pg, mut cache) = routed_cluster();
    if let Some(spec) = rw_of(&mut cache).spec.as_mut() {
        spec.selector = Some([("extra".to_owned(), "yes".to_owned())].into());
    }
    let script = vec![unselect_rw(), Expect::apply_status(STATUS)];
    let (_, seen) = scenario(pg, cache, script).await;
    assert_eq!(seen[0].body["spec"], json!({"selector": null}));
}

#[tokio::test]
async fn an_ipv6_slice_emptied_keeps_its_address_type() {
    let (pg, mut cache) = converged(SINGLE, true, BackupSchedule::NotConfigured);
    cache.set_pods(&pg, vec![pod("demo-0", "primary", true, "fd00::10")]);
    assert_eq!(cache.endpoint_slices[0].address_type, "IPv6");
    cache.pods = vec![pod("demo-0", "primary", false, "fd00::10")];
    let script = vec![
        Expect::apply(RW_SLICE),
        Expect::apply(ANY_SLICE),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    for slice in &seen[..2] {
        assert_eq!(slice.body["endpoints"], json!([]));
        assert_eq!(
            slice.body["addressType"], "IPv6",
            "immutable: the API server refuses a change"
        );
    }
}

/// An earlier Tusk's `-ro` and `-r` selected by label, and kube-controller-manager routed them:
/// they move over as `-rw` did, while the operator's slices already route.
#[tokio::test]
async fn selector_routed_readers_move_to_the_operators_slices_once() {
    let (pg, mut cache) = three_instances(3);
    cache.set_pods(&pg, three_pods(true));
    let selected = |role: Option<&str>| {
        let mut selector = std::collections::BTreeMap::from([
            ("app.kubernetes.io/instance".to_owned(), "demo".to_owned()),
            (
                "app.kubernetes.io/component".to_owned(),
                "database".to_owned(),
            ),
        ]);
        if let Some(role) = role {
            selector.insert("tusk.dev/role".to_owned(), role.to_owned());
        }
        selector
    };
    for (name, role) in [("demo-ro", Some("replica")), ("demo-r", None)] {
        let service = (cache.services.iter_mut())
            .find(|s| s.metadata.name.as_deref() == Some(name))
            .expect("the Service");
        service.metadata.annotations = None;
        if let Some(spec) = service.spec.as_mut() {
            spec.selector = Some(selected(role));
        }
    }
    let unselect = |name: &str| {
        let path = format!("{SERVICES}/{name}");
        Expect::new(Method::PATCH, path, move |_| {
            (
                StatusCode::OK,
                json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "x", "namespace": "prod", "resourceVersion": "2"}}),
            )
        })
    };
    // 1. The selectors go; the children's apply leaves both Services to the move.
    let script = vec![
        holder(),
        unselect("demo-ro"),
        unselect("demo-r"),
        Expect::apply_status(STATUS),
    ];
    three(&pg, cache.clone(), script).await;

    // 2. No selector in the cache, the settle passed: kube-controller-manager's objects go,
    //    then the annotation.
    for service in &mut cache.services {
        let reader = matches!(service.metadata.name.as_deref(), Some("demo-ro" | "demo-r"));
        if let Some(spec) = service.spec.as_mut().filter(|_| reader) {
            spec.selector = None;
            service.metadata.annotations = Some(
                [(
                    "tusk.dev/unselected-at".to_owned(),
                    "2026-01-01T00:00:00Z".to_owned(),
                )]
                .into(),
            );
        }
    }
    let mut script = vec![holder()];
    for name in ["demo-ro", "demo-r"] {
        script.extend([
            Expect::delete(format!("/api/v1/namespaces/prod/endpoints/{name}")),
            Expect::delete("/apis/discovery.k8s.io/v1/namespaces/prod/endpointslices"),
            unselect(name),
        ]);
    }
    script.push(Expect::apply_status(STATUS));
    let seen = three(&pg, cache, script).await;
    assert!(
        seen[5].query.contains("service-name%3Ddemo-r%2C"),
        "{}",
        seen[5].query
    );
    for ended in [&seen[3], &seen[6]] {
        assert_eq!(
            ended.body,
            json!({"metadata": {"annotations": {"tusk.dev/endpoints": "operator",
                                                "tusk.dev/unselected-at": null}}})
        );
    }
}

/// A replica that stops being Ready leaves `-ro` and `-r` in the reconcile that sees it; the
/// primary's `-rw` is not written.
#[tokio::test]
async fn an_unready_replica_leaves_the_readers_slices() {
    let (pg, mut cache) = three_instances(2);
    cache.set_pods(&pg, three_pods(true));
    let mut pods = three_pods(true);
    pods[1] = pod("demo-1", "replica", false, "10.0.0.11");
    cache.pods = pods;
    let script = vec![
        holder(),
        Expect::apply(RO_SLICE),
        Expect::apply(ANY_SLICE),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let seen = three(&pg, cache, script).await;
    let names = |slice: &Value| {
        let endpoints = slice["endpoints"].as_array().cloned().unwrap_or_default();
        endpoints
            .iter()
            .map(|e| e["targetRef"]["name"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&seen[1].body), [json!("demo-2")]);
    assert_eq!(names(&seen[2].body), [json!("demo-0"), json!("demo-2")]);
}
