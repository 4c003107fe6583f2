//! The role source against a mocked API server: what it reads and what it writes.

use super::*;

#[test]
fn lease_view_reads_holder_duration_and_members() {
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "demo-primary",
                     "annotations": {"tusk.dev/instances": "demo-0, demo-1,demo-2"}},
        "spec": {"holderIdentity": "demo-1", "leaseDurationSeconds": 6}
    }))
    .unwrap();
    let view = view_of(&lease);
    assert_eq!(view.holder.as_deref(), Some("demo-1"));
    assert_eq!(view.duration, Duration::from_secs(6));
    assert_eq!(view.instances, ["demo-0", "demo-1", "demo-2"]);
    let empty: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "demo-primary"}, "spec": {"holderIdentity": ""}
    }))
    .unwrap();
    assert_eq!(view_of(&empty).holder, None);
}

#[test]
fn a_renewal_wakes_no_one_but_a_new_holder_or_switchover_does() {
    let lease = |holder: &str, renewed: &str, to: Option<&str>| -> Option<Lease> {
        let annotations = to.map(|to| serde_json::json!({SWITCHOVER_TO: to}));
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo-primary", "annotations": annotations},
            "spec": {"holderIdentity": holder, "renewTime": renewed}
        }))
        .ok()
    };
    let seen = turn_of(lease("demo-0", "2026-12-04T05:00:00.000000Z", None));
    let renewed = turn_of(lease("demo-0", "2026-12-04T05:00:01.000000Z", None));
    assert_eq!(seen, renewed, "a renewal is not a turn");
    let asked = turn_of(lease(
        "demo-0",
        "2026-12-04T05:00:01.000000Z",
        Some("demo-1"),
    ));
    assert_ne!(seen, asked, "a switchover's target is");
    let released = turn_of(lease("", "2026-12-04T05:00:01.000000Z", Some("demo-1")));
    assert_ne!(asked, released, "a release is");
    assert_ne!(released, turn_of(None), "and a deleted Lease");
}

type Handle =
    tower_test::mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>;

fn mock_api() -> (Api<Lease>, Handle) {
    let (service, handle) = tower_test::mock::pair();
    (
        Api::namespaced(kube::Client::new(service, "ns"), "ns"),
        handle,
    )
}

fn lease_json(holder: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "demo-primary", "namespace": "ns", "resourceVersion": "41"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 6}
    })
}

fn respond(status: u16, body: &serde_json::Value) -> http::Response<kube::client::Body> {
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap()
}

/// Answers the GET with a Lease held by `holder`, then the PUT (if one comes within a
/// moment) with `put_status`; returns the PUT's body.
async fn serve(mut handle: Handle, holder: &str, put_status: u16) -> Option<serde_json::Value> {
    let (get, send) = handle.next_request().await.expect("a GET");
    assert_eq!(get.method(), http::Method::GET);
    assert_eq!(
        get.uri().path(),
        "/apis/coordination.k8s.io/v1/namespaces/ns/leases/demo-primary"
    );
    send.send_response(respond(200, &lease_json(holder)));
    let next = tokio::time::timeout(Duration::from_millis(300), handle.next_request()).await;
    let (put, send) = next.ok().flatten()?;
    assert_eq!(put.method(), http::Method::PUT);
    let bytes = put.into_body().collect_bytes().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    send.send_response(respond(put_status, &body));
    Some(body)
}

/// `me` polls a Lease held by `holder`; a renew is answered with `put_status`.
async fn poll_as(
    me: &str,
    holder: &str,
    put_status: u16,
) -> (Result<Poll, Error>, Option<serde_json::Value>) {
    let pod = Holder { me, address: None };
    poll_with(pod, holder, put_status).await
}

async fn poll_with(
    pod: Holder<'_>,
    holder: &str,
    put_status: u16,
) -> (Result<Poll, Error>, Option<serde_json::Value>) {
    poll_intending(pod, holder, put_status, &Intent::default()).await
}

async fn poll_intending(
    pod: Holder<'_>,
    holder: &str,
    put_status: u16,
    intent: &Intent,
) -> (Result<Poll, Error>, Option<serde_json::Value>) {
    let (api, handle) = mock_api();
    tokio::join!(
        poll_lease(&api, "demo-primary", pod, intent),
        serve(handle, holder, put_status)
    )
}

#[test]
fn the_lease_duration_is_the_contracts_whatever_the_lease_says() {
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "demo-primary"},
        "spec": {"holderIdentity": "demo-1", "leaseDurationSeconds": 1}
    }))
    .unwrap();
    assert_eq!(view_of(&lease).duration, Duration::from_secs(6));
}

#[tokio::test]
async fn the_holder_records_the_system_identifier_once_and_an_abstaining_one_never_renews() {
    let me = Holder {
        me: "demo-0",
        address: None,
    };
    let intent = Intent {
        system_identifier: Some("7401".into()),
        ..Intent::default()
    };
    let (poll, put) = poll_intending(me, "demo-0", 200, &intent).await;
    assert_eq!(
        poll.unwrap().view.system_identifier.as_deref(),
        Some("7401")
    );
    let put = put.expect("a renew");
    assert_eq!(put["metadata"]["annotations"][SYSTEM_IDENTIFIER], "7401");
    let abstaining = Intent {
        abstain: true,
        ..intent
    };
    let (poll, put) = poll_intending(me, "demo-0", 200, &abstaining).await;
    assert!(!poll.unwrap().renewed);
    assert!(put.is_none(), "an abstaining holder renewed");
}

#[tokio::test]
async fn the_holder_publishes_its_address_with_the_renew() {
    let pod = Holder {
        me: "demo-0",
        address: Some("10.0.0.7"),
    };
    let (poll, put) = poll_with(pod, "demo-0", 200).await;
    assert_eq!(
        poll.unwrap().view.holder_address.as_deref(),
        Some("10.0.0.7")
    );
    let put = put.expect("a renew");
    let annotations = &put["metadata"]["annotations"];
    assert_eq!(annotations[HOLDER_ADDRESS], "demo-0=10.0.0.7");
    // A non-holder never writes its address.
    let other = Holder {
        me: "demo-1",
        address: Some("10.0.0.8"),
    };
    let (_, put) = poll_with(other, "demo-0", 200).await;
    assert!(put.is_none(), "a non-holder wrote the Lease");
}

#[test]
fn an_address_published_for_another_pod_is_not_the_holders() {
    let lease_with = |holder: &str, address: &str| -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo-primary",
                         "annotations": {HOLDER_ADDRESS: address}},
            "spec": {"holderIdentity": holder}
        }))
        .unwrap()
    };
    let published = view_of(&lease_with("demo-1", "demo-1=10.0.0.9"));
    assert_eq!(published.holder_address.as_deref(), Some("10.0.0.9"));
    // The operator handed the Lease to demo-2; demo-1's address is not demo-2's.
    let stale = view_of(&lease_with("demo-2", "demo-1=10.0.0.9"));
    assert_eq!(stale.holder_address, None);
    assert_eq!(
        view_of(&lease_with("demo-1", "garbage")).holder_address,
        None
    );
}

#[tokio::test]
async fn the_holder_renews_with_the_read_resource_version() {
    let (poll, put) = poll_as("demo-0", "demo-0", 200).await;
    assert!(poll.unwrap().renewed);
    let put = put.expect("a renew");
    assert_eq!(put["metadata"]["resourceVersion"], "41");
    assert!(put["spec"]["renewTime"].is_string(), "{put}");
    assert_eq!(put["spec"]["holderIdentity"], "demo-0");
}

#[tokio::test]
async fn a_conflicting_renew_is_a_failed_renew() {
    let (poll, put) = poll_as("demo-0", "demo-0", 409).await;
    assert!(put.is_some());
    assert!(poll.is_err());
}

#[tokio::test]
async fn a_non_holder_only_reads() {
    let (poll, put) = poll_as("demo-1", "demo-0", 200).await;
    let poll = poll.unwrap();
    assert!(!poll.renewed);
    assert_eq!(poll.view.holder.as_deref(), Some("demo-0"));
    assert!(put.is_none(), "a non-holder wrote the Lease");
}
