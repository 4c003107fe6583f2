//! A scripted API server: each scenario lists the exact requests a reconcile must make, in order,
//! with the response to each. A request that differs, one more request than scripted, or one
//! that never comes (within a timeout) fails the scenario. Requests a reconcile sends together
//! are scripted as a group ([`together`]): all of them, in any order, before what follows.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tower_test::mock::{self, Handle};

/// How long an expected request may take to arrive.
const TIMEOUT: Duration = Duration::from_secs(5);

type Responder = Box<dyn FnOnce(&Value) -> (StatusCode, Value) + Send>;

/// One expected request and how to answer it.
pub struct Expect {
    pub method: Method,
    pub path: String,
    respond: Responder,
    /// The group of requests sent together this one belongs to (see [`together`]).
    group: Option<usize>,
}

/// A script of consecutive parts (single requests and [`together`] groups).
pub fn steps<const N: usize>(parts: [Vec<Expect>; N]) -> Vec<Expect> {
    parts.into_iter().flatten().collect()
}

/// `requests`, sent together: they may arrive in any order, and all before the next step.
pub fn together(requests: Vec<Expect>) -> Vec<Expect> {
    static GROUPS: AtomicUsize = AtomicUsize::new(0);
    let group = GROUPS.fetch_add(1, Ordering::Relaxed);
    requests
        .into_iter()
        .map(|expect| Expect {
            group: Some(group),
            ..expect
        })
        .collect()
}

/// A request the scenario saw, for assertions on what was sent.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub body: Value,
}

impl Expect {
    /// Expects `method path` and answers with `respond(request body)`.
    pub fn new(
        method: Method,
        path: impl Into<String>,
        respond: impl FnOnce(&Value) -> (StatusCode, Value) + Send + 'static,
    ) -> Self {
        Self {
            method,
            path: path.into(),
            respond: Box::new(respond),
            group: None,
        }
    }

    /// A server-side apply, answered with the applied object.
    pub fn apply(path: impl Into<String>) -> Self {
        Self::new(Method::PATCH, path, |body| {
            (StatusCode::OK, with_metadata(body.clone()))
        })
    }

    /// A server-side apply of a PostgreSQL's status, answered with the whole object.
    pub fn apply_status(path: impl Into<String>) -> Self {
        Self::new(Method::PATCH, path, |body| {
            (StatusCode::OK, tusk_object(CLUSTER, Some(&body["status"])))
        })
    }

    /// A server-side apply of a Backup's status, answered with the whole Backup.
    pub fn apply_backup_status(path: impl Into<String>) -> Self {
        Self::new(Method::PATCH, path, |body| {
            (StatusCode::OK, tusk_object(BACKUP, Some(&body["status"])))
        })
    }

    /// A delete, answered with success.
    pub fn delete(path: impl Into<String>) -> Self {
        Self::new(Method::DELETE, path, |_| {
            (
                StatusCode::OK,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            )
        })
    }

    /// A patch of the PostgreSQL itself (its finalizers), answered with a cluster object.
    pub fn patch_cluster(path: impl Into<String>) -> Self {
        Self::new(Method::PATCH, path, |_| {
            (StatusCode::OK, tusk_object(CLUSTER, None))
        })
    }

    /// A server-side apply answered with the applied object changed by `edit`, as when the
    /// server adds its own fields (a StatefulSet's status, say).
    pub fn apply_with(
        path: impl Into<String>,
        edit: impl FnOnce(&mut Value) + Send + 'static,
    ) -> Self {
        Self::new(Method::PATCH, path, |body| {
            let mut object = with_metadata(body.clone());
            edit(&mut object);
            (StatusCode::OK, object)
        })
    }

    /// A create, answered with the created object.
    pub fn create(path: impl Into<String>) -> Self {
        Self::new(Method::POST, path, |body| {
            (StatusCode::CREATED, with_metadata(body.clone()))
        })
    }

    /// A create of an object that exists already (409 AlreadyExists).
    pub fn already_exists(path: impl Into<String>) -> Self {
        Self::new(Method::POST, path, |_| {
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "AlreadyExists", "code": 409, "message": "already exists"});
            (StatusCode::CONFLICT, status)
        })
    }

    /// A read of an object that does not exist.
    pub fn get_missing(path: impl Into<String>) -> Self {
        Self::new(Method::GET, path, |_| {
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "NotFound", "code": 404, "message": "not found"});
            (StatusCode::NOT_FOUND, status)
        })
    }

    /// The list of a failed Job's pods, answered with one pod whose agent container ended with
    /// `exit_code` and termination message `message`.
    pub fn job_pods(namespace: &str, exit_code: i32, message: &str) -> Self {
        let message = message.to_owned();
        Self::new(
            Method::GET,
            format!("/api/v1/namespaces/{namespace}/pods"),
            move |_| {
                let pod = json!({
                    "metadata": {"name": "job-pod", "namespace": "prod"},
                    "status": {"phase": "Failed", "containerStatuses": [{
                        "name": "backup-agent", "image": "agent", "imageID": "", "ready": false,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": exit_code, "reason": "Error",
                            "message": message, "finishedAt": "2026-11-22T02:01:00Z"}},
                    }]},
                });
                let list = json!({"apiVersion": "v1", "kind": "PodList",
                    "metadata": {"resourceVersion": "1"}, "items": [pod]});
                (StatusCode::OK, list)
            },
        )
    }

    /// An Event published about the cluster.
    pub fn event(namespace: &str) -> Self {
        Self::create(format!(
            "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
        ))
    }
}

/// The fields the API server adds to what it stores.
fn with_metadata(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.entry("resourceVersion").or_insert(json!("1"));
        meta.entry("generation").or_insert(json!(1));
        meta.entry("uid")
            .or_insert(json!("00000000-0000-0000-0000-000000000001"));
    }
    object
}

/// The mock API server behind a [`Client`].
pub struct Verifier {
    handle: Handle<Request<Body>, Response<Body>>,
}

/// A client whose requests reach the returned verifier.
pub fn client() -> (Client, Verifier) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), Verifier { handle })
}

impl Verifier {
    /// Plays `script` while `work` (a reconcile) runs; its output and every request seen. A
    /// mismatch, a missing or an extra call fails the test.
    pub async fn play_during<T>(
        self,
        script: Vec<Expect>,
        work: impl Future<Output = T>,
    ) -> (T, Vec<Seen>) {
        let (done, finished) = oneshot::channel();
        let played = self.play(script, finished);
        let output = work.await;
        let _ = done.send(());
        let seen = played
            .await
            .expect("verifier ran")
            .unwrap_or_else(|e| panic!("{e}"));
        (output, seen)
    }

    /// Plays `script`, then answers any further request with an error until `done` fires.
    /// Resolves to every request seen, or to a description of the first mismatch or extra call.
    fn play(
        mut self,
        script: Vec<Expect>,
        done: oneshot::Receiver<()>,
    ) -> JoinHandle<Result<Vec<Seen>, String>> {
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut script = VecDeque::from(script);
            let mut step = 0;
            while let Some(front) = script.front() {
                // What may come now: the next request, or any of the group it begins.
                let group = front.group;
                let open = script
                    .iter()
                    .take_while(|e| e.group.is_some() && e.group == group)
                    .count()
                    .max(1);
                let expected = script
                    .iter()
                    .take(open)
                    .map(|e| format!("{} {}", e.method, e.path))
                    .collect::<Vec<_>>()
                    .join(" or ");
                let next = tokio::time::timeout(TIMEOUT, self.handle.next_request()).await;
                let Ok(Some((request, send))) = next else {
                    return Err(format!(
                        "step {step}: expected {expected} but it never came; seen so far: {:#?}",
                        summary(&seen)
                    ));
                };
                let (parts, body) = request.into_parts();
                let bytes = body.collect_bytes().await.map_err(|e| e.to_string())?;
                let body: Value = if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).map_err(|e| e.to_string())?
                };
                let request = Seen {
                    method: parts.method.clone(),
                    path: parts.uri.path().to_owned(),
                    query: parts.uri.query().unwrap_or_default().to_owned(),
                    body,
                };
                let matched = script
                    .iter()
                    .take(open)
                    .position(|e| request.method == e.method && request.path == e.path);
                let Some(expect) = matched.and_then(|index| script.remove(index)) else {
                    return Err(format!(
                        "step {step}: expected {expected} but got {} {}; seen before: {:#?}",
                        request.method,
                        request.path,
                        summary(&seen)
                    ));
                };
                let (status, answer) = (expect.respond)(&request.body);
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(
                        serde_json::to_vec(&answer).map_err(|e| e.to_string())?,
                    ))
                    .map_err(|e| e.to_string())?;
                send.send_response(response);
                seen.push(request);
                step += 1;
            }
            let mut done = done;
            let mut extra = Vec::new();
            loop {
                tokio::select! {
                    _ = &mut done => break,
                    next = self.handle.next_request() => {
                        let Some((request, send)) = next else { break };
                        let line = format!("{} {}", request.method(), request.uri().path());
                        // The body says why the call was made (a status patch's fields).
                        let bytes = request.into_body().collect_bytes().await.unwrap_or_default();
                        let body = String::from_utf8_lossy(&bytes);
                        extra.push(format!("{line} {:.600}", body));
                        let response = Response::builder()
                            .status(StatusCode::INTERNAL_SERVER_ERROR)
                            .body(Body::from(Vec::new()))
                            .map_err(|e| e.to_string())?;
                        send.send_response(response);
                    }
                }
            }
            if !extra.is_empty() {
                let played: Vec<String> = seen
                    .iter()
                    .map(|s| {
                        format!(
                            "{} {} {}",
                            s.method,
                            s.path,
                            s.body.get("reason").unwrap_or(&Value::Null)
                        )
                    })
                    .collect();
                return Err(format!(
                    "unexpected calls after the script: {extra:#?}; played: {played:#?}"
                ));
            }
            Ok(seen)
        })
    }
}

fn summary(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .map(|s| format!("{} {}", s.method, s.path))
        .collect()
}

/// Requests that change state (anything but GET, LIST and WATCH).
pub fn writes(seen: &[Seen]) -> Vec<&Seen> {
    seen.iter().filter(|s| s.method != Method::GET).collect()
}

/// The tusk.dev objects the scenarios answer with: kind, name and spec.
struct TuskObject {
    kind: &'static str,
    name: &'static str,
    spec: fn() -> Value,
}

const CLUSTER: TuskObject = TuskObject {
    kind: "PostgreSQL",
    name: "demo",
    spec: || json!({"storage": {"size": "1Gi"}}),
};

const BACKUP: TuskObject = TuskObject {
    kind: "Backup",
    name: "nightly",
    spec: || json!({"cluster": {"name": "demo"}}),
};

/// `object` in namespace `prod` as the server returns it, with `status` when one was written.
fn tusk_object(object: TuskObject, status: Option<&Value>) -> Value {
    let mut value = json!({
        "apiVersion": "tusk.dev/v1alpha1", "kind": object.kind,
        "metadata": {"name": object.name, "namespace": "prod"},
        "spec": (object.spec)(),
    });
    if let Some(status) = status {
        value["status"] = status.clone();
    }
    with_metadata(value)
}
