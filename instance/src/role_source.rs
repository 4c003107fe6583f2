//! Where the manager learns its role: the Lease in production (read, and renewed while this
//! pod holds it), or a JSON file standing in for it in tests. A background task polls the
//! source and publishes what it saw and when the last successful renew *started* (so network
//! time counts against the holder, not for it). During a switchover it polls faster, and the
//! holder releases the Lease instead of renewing it once the supervisor has demoted it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use crate::decide::LeaseView;
use crate::error::Error;

pub const INSTANCES_ANNOTATION: &str = "tusk.dev/instances";
/// Written by the operator: the holder is asked to hand over to this member.
pub const SWITCHOVER_TO_ANNOTATION: &str = "tusk.dev/switchover-to";
/// Written by the holder when it releases the Lease in a switchover: the location of its
/// final (shutdown) checkpoint, which the target must have replayed past before promotion.
pub const FINAL_LSN_ANNOTATION: &str = "tusk.dev/final-lsn";

/// How much faster the Lease is polled while a switchover is in progress: the target learns it
/// holds the Lease within a fifth of the renew interval, which is most of the write gap.
const SWITCHOVER_POLL_DIVISOR: u32 = 5;

/// What the supervisor reads: the Lease as last seen and the start of the last good renew.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub lease: Option<LeaseView>,
    pub last_renew: Option<Instant>,
}

/// One poll's outcome: the Lease, and whether this pod renewed it.
pub struct Poll {
    pub view: LeaseView,
    pub renewed: bool,
}

pub enum RoleSource {
    Lease { api: Box<Api<Lease>>, name: String },
    File { path: PathBuf },
}

impl RoleSource {
    pub fn lease(client: kube::Client, namespace: &str, name: &str) -> RoleSource {
        RoleSource::Lease {
            api: Box::new(Api::namespaced(client, namespace)),
            name: name.to_string(),
        }
    }

    async fn poll(&self, me: &str, release: Option<&str>) -> Result<Poll, Error> {
        match self {
            RoleSource::Lease { api, name } => poll_lease(api, name, me, release).await,
            RoleSource::File { path } => poll_file(path, me, release).await,
        }
    }
}

/// Whether the holder `me` of the Lease seen as `view` gives it up now: it was asked to switch
/// over to another member and the supervisor has demoted it (`release`: the final LSN).
fn releases(view: &LeaseView, me: &str, release: Option<&str>) -> bool {
    release.is_some()
        && view.holder.as_deref() == Some(me)
        && view
            .switchover_to
            .as_deref()
            .is_some_and(|target| target != me)
}

/// Reads the Lease and, when this pod holds it, renews it with the read `resourceVersion` (a
/// concurrent handover makes the update fail instead of being overwritten) — or, demoted in a
/// switchover, releases it: no holder, and the final LSN for the operator.
async fn poll_lease(
    api: &Api<Lease>,
    name: &str,
    me: &str,
    release: Option<&str>,
) -> Result<Poll, Error> {
    let kube_error = |source| Error::Kube {
        name: name.to_string(),
        source: Box::new(source),
    };
    let mut lease = api.get(name).await.map_err(kube_error)?;
    let mut view = view_of(&lease);
    let holder = view.holder.as_deref() == Some(me);
    if let (true, Some(lsn)) = (releases(&view, me, release), release) {
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = None;
        lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(FINAL_LSN_ANNOTATION.to_string(), lsn.to_string());
        api.replace(name, &PostParams::default(), &lease)
            .await
            .map_err(kube_error)?;
        tracing::info!(final_lsn = lsn, "released the Lease for the switchover");
        view.holder = None;
        return Ok(Poll {
            view,
            renewed: false,
        });
    }
    if holder {
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        api.replace(name, &PostParams::default(), &lease)
            .await
            .map_err(kube_error)?;
    }
    Ok(Poll {
        view,
        renewed: holder,
    })
}

pub fn view_of(lease: &Lease) -> LeaseView {
    let spec = lease.spec.clone().unwrap_or_default();
    let annotation = |key: &str| {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .filter(|value| !value.is_empty())
            .cloned()
    };
    LeaseView {
        holder: spec.holder_identity.filter(|h| !h.is_empty()),
        duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(6).max(1) as u64),
        instances: annotation(INSTANCES_ANNOTATION)
            .map(|list| parse_instances(&list))
            .unwrap_or_default(),
        switchover_to: annotation(SWITCHOVER_TO_ANNOTATION),
    }
}

fn parse_instances(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// The test stand-in: `{"holder": "a", "instances": "a,b", "leaseDurationSeconds": 6,
/// "renew": true, "switchoverTo": "b"}`; `renew: false` (or an unreadable file) is a renew that
/// fails. A release rewrites the file with no holder and `finalLsn`.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct FileLease {
    #[serde(default)]
    holder: String,
    #[serde(default)]
    instances: String,
    #[serde(default = "six")]
    lease_duration_seconds: u64,
    #[serde(default = "yes")]
    renew: bool,
    #[serde(default)]
    switchover_to: String,
    #[serde(default)]
    final_lsn: String,
}

fn six() -> u64 {
    6
}

fn yes() -> bool {
    true
}

async fn poll_file(path: &PathBuf, me: &str, release: Option<&str>) -> Result<Poll, Error> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(Error::io(format!("reading {}", path.display())))?;
    let mut file: FileLease = serde_json::from_str(&text)
        .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    let mut view = LeaseView {
        holder: Some(file.holder.clone()).filter(|h| !h.is_empty()),
        duration: Duration::from_secs(file.lease_duration_seconds.max(1)),
        instances: parse_instances(&file.instances),
        switchover_to: Some(file.switchover_to.clone()).filter(|t| !t.is_empty()),
    };
    if let (true, Some(lsn)) = (releases(&view, me, release), release) {
        file.holder.clear();
        file.final_lsn = lsn.to_string();
        let text = serde_json::to_string(&file).map_err(|e| Error::Config(e.to_string()))?;
        tokio::fs::write(path, text)
            .await
            .map_err(Error::io(format!("writing {}", path.display())))?;
        view.holder = None;
        return Ok(Poll {
            view,
            renewed: false,
        });
    }
    let holder = view.holder.as_deref() == Some(me);
    if holder && !file.renew {
        return Err(Error::State("renew refused by the role file".into()));
    }
    Ok(Poll {
        view,
        renewed: holder,
    })
}

/// Polls `source` every `interval` (a fifth of it during a switchover) and publishes the
/// result. The returned sender is the supervisor's release request: the final LSN once it has
/// demoted the holder in a switchover, honoured only while the Lease still asks for one.
pub fn spawn(
    source: RoleSource,
    me: String,
    interval: Duration,
) -> (watch::Receiver<Observed>, watch::Sender<Option<String>>) {
    let (tx, rx) = watch::channel(Observed::default());
    let (release_tx, release_rx) = watch::channel(None::<String>);
    tokio::spawn(async move {
        let mut observed = Observed::default();
        let mut failing = false;
        loop {
            let started = Instant::now();
            let release = release_rx.borrow().clone();
            let poll = source.poll(&me, release.as_deref());
            match tokio::time::timeout(interval * 2, poll).await {
                Ok(Ok(poll)) => {
                    if failing {
                        tracing::info!("role source reachable again");
                        failing = false;
                    }
                    if poll.renewed {
                        observed.last_renew = Some(started);
                    }
                    observed.lease = Some(poll.view);
                }
                Ok(Err(e)) if !failing => {
                    tracing::warn!(error = %e, "reading or renewing the Lease failed");
                    failing = true;
                }
                Err(_) if !failing => {
                    tracing::warn!("reading or renewing the Lease timed out");
                    failing = true;
                }
                _ => {}
            }
            if tx.send(observed.clone()).is_err() {
                return;
            }
            let switching = observed
                .lease
                .as_ref()
                .is_some_and(|lease| lease.switchover_to.is_some());
            let pause = if switching {
                interval / SWITCHOVER_POLL_DIVISOR
            } else {
                interval
            };
            tokio::time::sleep_until((started + pause).into()).await;
        }
    });
    (rx, release_tx)
}

#[cfg(test)]
mod tests {
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

    type Handle = tower_test::mock::Handle<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >;

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
        let (api, handle) = mock_api();
        tokio::join!(
            poll_lease(&api, "demo-primary", me, None),
            serve(handle, holder, put_status)
        )
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
}
