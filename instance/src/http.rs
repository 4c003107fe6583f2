//! The HTTP endpoint the operator reads, over TLS with the cluster's server certificate
//! (`status_tls`): `GET /status` (JSON, `report`; docs/src/design/replication.md) and `GET /metrics`
//! (Prometheus, `metrics`), both only with the cluster's status token (`status_auth`);
//! `GET /healthz` (the manager runs) and `GET /readyz` (PostgreSQL accepts connections in the
//! role the Lease gives) stay open for the kubelet's probes. No request opens a connection to
//! the server: reports come from the monitor's cached facts. `POST /archive/check` (with the
//! token) asks for the continuity check a base backup's history file would have asked for.
//! `GET /upgrade/preflight` and both sides' steps of an online upgrade (`/upgrade/…`,
//! `tusk_contract::upgrade_source` and `upgrade_target`) need the token too.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tusk_contract::upgrade::PREFLIGHT_PATH;
use tusk_contract::{upgrade_source, upgrade_target};

use crate::archiver::Archiver;
use crate::context::Context;
use crate::error::Error;
use crate::monitor::Observation;
use crate::report::{ManagerState, SharedState, StatusReport, report};
use crate::status_auth::StatusToken;

#[derive(Clone)]
struct App {
    ctx: Arc<Context>,
    archiver: Option<Arc<Archiver>>,
    state: SharedState,
    observed: watch::Receiver<Observation>,
    token: StatusToken,
    /// An online upgrade's copy onto this (new) side.
    copy: Arc<crate::upgrade_target::Copy>,
}

/// How long a request waits for the monitor's first answer from a postmaster just started.
const FIRST_FACTS_WAIT: Duration = Duration::from_secs(1);

impl App {
    /// The report from the manager's state and the monitor's cached facts: no request ever
    /// opens a connection to the server. Right after a postmaster started, the monitor's first
    /// answer about it is awaited (briefly), so a report never misses facts the server has;
    /// one that answered before and no longer does (shutting down for a switchover) is
    /// reported at once: the operator waits on this report to hand the Lease over.
    async fn report(&self) -> StatusReport {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut observed = self.observed.clone();
        let starting = awaits_first_facts(&state, &observed.borrow());
        if starting {
            let first = observed.wait_for(|o| o.fresh(state.generation).is_some());
            let _ = tokio::time::timeout(FIRST_FACTS_WAIT, first).await;
        }
        let observation = observed.borrow().clone();
        let mut report = report(self.ctx.me(), &state, &observation);
        report.archive = self.archiver.as_ref().map(|a| a.status());
        report
    }
}

/// Whether a report waits for the monitor's first facts: only about a running postmaster it
/// has never had an answer from (just started), not one that answered before and no longer
/// does (shutting down).
fn awaits_first_facts(state: &ManagerState, observation: &Observation) -> bool {
    state.postgres_running
        && observation.fresh(state.generation).is_none()
        && observation.answered != state.generation
}

/// Binds the status port (failing now, not later, when it is taken) and serves it over TLS.
pub async fn serve(
    ctx: Arc<Context>,
    archiver: Option<Arc<Archiver>>,
    state: SharedState,
    observed: watch::Receiver<Observation>,
) -> Result<(), Error> {
    let port = ctx.args.status_port;
    let listener = crate::status_accept::bind(port)?;
    let acceptor = TlsAcceptor::from(crate::status_tls::server_config(&ctx.args.tls_dir())?);
    let token = StatusToken::new(ctx.args.status_token_file.clone());
    let app = axum::Router::new()
        .route("/status", get(status))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/archive/check", post(archive_check))
        .route(PREFLIGHT_PATH, get(upgrade_preflight))
        .route(upgrade_source::PUBLISH_PATH, post(upgrade_publish))
        .route(upgrade_source::FREEZE_PATH, post(upgrade_freeze))
        .route(upgrade_source::CONFIRMED_PATH, post(upgrade_confirmed))
        .route(upgrade_source::THAW_PATH, post(upgrade_thaw))
        .route(upgrade_source::UNPUBLISH_PATH, post(upgrade_unpublish))
        .route(upgrade_target::COPY_PATH, post(upgrade_copy))
        .route(upgrade_target::PROGRESS_PATH, get(upgrade_progress))
        .route(upgrade_target::FINISH_PATH, post(upgrade_finish))
        .with_state(App {
            ctx,
            archiver,
            state,
            observed,
            token,
            copy: Arc::default(),
        });
    tokio::spawn(crate::status_accept::accept(listener, acceptor, app));
    Ok(())
}

/// 401 for a request without the status token.
fn refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "the cluster's status token is required\n",
    )
        .into_response()
}

// Serialized here rather than with axum's `json` feature, which would add crates to the tree.
async fn status(State(app): State<App>, headers: HeaderMap) -> Response {
    if !app.token.admits(&headers) {
        return refused();
    }
    let body = serde_json::to_string(&app.report().await).unwrap_or_else(|_| "{}".into());
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A base backup read from a standby leaves no backup history file in this primary's pg_wal,
/// the archiver's signal for the restore point and the continuity check after a base backup:
/// the operator asks for them here once the Backup is Completed. Requests coalesce (one
/// check at a time, one pending); a manager that does not archive has nothing to check.
async fn archive_check(State(app): State<App>, headers: HeaderMap) -> Response {
    if !app.token.admits(&headers) {
        return refused();
    }
    match &app.archiver {
        Some(archiver) => {
            archiver.continuity().soon();
            StatusCode::ACCEPTED.into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// What the databases hold that an online major-version upgrade cannot carry: asked by the
/// operator before such an upgrade starts. 503 with the reason when the server cannot answer.
async fn upgrade_preflight(State(app): State<App>, headers: HeaderMap) -> Response {
    if !app.token.admits(&headers) {
        return refused();
    }
    match crate::upgrade_preflight::preflight(&app.ctx).await {
        Ok(preflight) => {
            let body = serde_json::to_string(&preflight).unwrap_or_else(|_| "{}".into());
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(error) => (StatusCode::SERVICE_UNAVAILABLE, format!("{error}\n")).into_response(),
    }
}

/// One of an online upgrade's steps, on either side: only the manager that holds its set's
/// Lease and runs a primary takes it (409 otherwise); 503 with the reason when it fails. Its
/// answer, if any, as JSON.
async fn primary_step<F, T>(app: &App, headers: &HeaderMap, step: F) -> Response
where
    F: AsyncFnOnce(&Context) -> Result<T, Error>,
    T: serde::Serialize,
{
    if !app.token.admits(headers) {
        return refused();
    }
    let report = app.report().await;
    let holder = report.lease_holder.as_deref() == Some(app.ctx.me());
    if report.role != tusk_contract::Role::Primary || !holder {
        let message = "not the primary: an upgrade's steps run on the Lease's holder\n";
        return (StatusCode::CONFLICT, message).into_response();
    }
    match step(&app.ctx).await {
        Ok(answer) => {
            let body = serde_json::to_string(&answer).unwrap_or_else(|_| "null".into());
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(error) => (StatusCode::SERVICE_UNAVAILABLE, format!("{error}\n")).into_response(),
    }
}

async fn upgrade_publish(State(app): State<App>, headers: HeaderMap) -> Response {
    primary_step(&app, &headers, crate::upgrade_source::publish).await
}

async fn upgrade_freeze(State(app): State<App>, headers: HeaderMap) -> Response {
    primary_step(&app, &headers, crate::upgrade_source::freeze).await
}

async fn upgrade_confirmed(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let request: upgrade_source::ConfirmRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return bad_request(error),
    };
    let lsn = request.lsn;
    let step = async |ctx: &Context| crate::upgrade_source::confirmed(ctx, &lsn).await;
    primary_step(&app, &headers, step).await
}

async fn upgrade_thaw(State(app): State<App>, headers: HeaderMap) -> Response {
    primary_step(&app, &headers, crate::upgrade_source::thaw).await
}

async fn upgrade_unpublish(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    // No body, or `null`, from an operator that names no subscriber.
    let request: Option<upgrade_source::UnpublishRequest> = match body.trim_ascii() {
        [] => None,
        body => match serde_json::from_slice(body) {
            Ok(request) => request,
            Err(error) => return bad_request(error),
        },
    };
    let subscriber = request.and_then(|r| r.subscriber);
    let step =
        async |ctx: &Context| crate::upgrade_source::unpublish(ctx, subscriber.as_deref()).await;
    primary_step(&app, &headers, step).await
}

fn bad_request(error: serde_json::Error) -> Response {
    (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response()
}

async fn upgrade_copy(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let request: upgrade_target::CopyRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return bad_request(error),
    };
    let (ctx, copy) = (app.ctx.clone(), app.copy.clone());
    let step = async move |_: &Context| {
        crate::upgrade_target::start(&ctx, &copy, request);
        Ok::<_, Error>(())
    };
    let mut answer = primary_step(&app, &headers, step).await;
    if answer.status() == StatusCode::OK {
        *answer.status_mut() = StatusCode::ACCEPTED;
    }
    answer
}

async fn upgrade_progress(State(app): State<App>, headers: HeaderMap) -> Response {
    let copy = app.copy.clone();
    let step = async move |ctx: &Context| crate::upgrade_target::progress(ctx, &copy).await;
    primary_step(&app, &headers, step).await
}

async fn upgrade_finish(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let request: upgrade_target::CopyRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return bad_request(error),
    };
    let step = async |ctx: &Context| crate::upgrade_target::finish(ctx, &request).await;
    primary_step(&app, &headers, step).await
}

async fn metrics(State(app): State<App>, headers: HeaderMap) -> Response {
    if !app.token.admits(&headers) {
        return refused();
    }
    let report = app.report().await;
    let observed = app.observed.borrow().clone();
    let volume = crate::metrics::volume(app.ctx.pgdata());
    let body = crate::metrics::render(&report, &observed, volume);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn readyz(State(app): State<App>) -> (StatusCode, &'static str) {
    if app.report().await.ready {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::monitor::ServerFacts;

    #[test]
    fn a_report_waits_for_a_new_server_but_not_for_one_that_stopped_answering() {
        let state = ManagerState {
            postgres_running: true,
            generation: Some(2),
            ..ManagerState::default()
        };
        let silent = |answered| Observation {
            generation: Some(2),
            at: Some(Instant::now()),
            answered,
            ..Observation::default()
        };
        assert!(
            awaits_first_facts(&state, &silent(Some(1))),
            "just started: the facts are worth a moment"
        );
        assert!(
            !awaits_first_facts(&state, &silent(Some(2))),
            "shutting down: reported at once, or the operator's read times out"
        );
        let answering = Observation {
            facts: Some(ServerFacts::default()),
            ..silent(Some(2))
        };
        assert!(!awaits_first_facts(&state, &answering));
        let stopped = ManagerState {
            postgres_running: false,
            ..state
        };
        assert!(!awaits_first_facts(&stopped, &silent(None)));
    }
}
