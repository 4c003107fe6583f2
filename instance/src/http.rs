//! The HTTP endpoint the operator reads, over TLS with the cluster's server certificate
//! (`status_tls`): `GET /status` (JSON, `report`; docs/replication.md) and `GET /metrics`
//! (Prometheus, `metrics`), both only with the cluster's status token (`status_auth`);
//! `GET /healthz` (the manager runs) and `GET /readyz` (PostgreSQL accepts connections in the
//! role the Lease gives) stay open for the kubelet's probes. No request opens a connection to
//! the server: reports come from the monitor's cached facts. `POST /archive/check` (with the
//! token) asks for the continuity check a base backup's history file would have asked for.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use crate::archiver::Archiver;
use crate::context::Context;
use crate::error::Error;
use crate::monitor::Observation;
use crate::report::{SharedState, StatusReport, report};
use crate::status_auth::StatusToken;

/// Connections served at once; more wait in the listen backlog. The kubelet's probes, the
/// operator and a scraper need a handful: a flood costs bounded memory, never a backend.
const MAX_CONNECTIONS: usize = 32;
/// A client that has not finished its TLS handshake, or sent its request head, by then is
/// dropped, so slow clients cannot hold the connections the probes need.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// No connection is kept longer (a keep-alive scraper reconnects).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct App {
    ctx: Arc<Context>,
    archiver: Option<Arc<Archiver>>,
    state: SharedState,
    observed: watch::Receiver<Observation>,
    token: StatusToken,
}

/// How long a request waits for the monitor's first answer from a postmaster just started.
const FIRST_FACTS_WAIT: Duration = Duration::from_secs(1);

impl App {
    /// The report from the manager's state and the monitor's cached facts: no request ever
    /// opens a connection to the server. Right after a postmaster started, the monitor's first
    /// answer about it is awaited (briefly), so a report never misses facts the server has.
    async fn report(&self) -> StatusReport {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut observed = self.observed.clone();
        if state.postgres_running && observed.borrow().fresh(state.generation).is_none() {
            let first = observed.wait_for(|o| o.fresh(state.generation).is_some());
            let _ = tokio::time::timeout(FIRST_FACTS_WAIT, first).await;
        }
        let observation = observed.borrow().clone();
        let mut report = report(self.ctx.me(), &state, &observation);
        report.archive = self.archiver.as_ref().map(|a| a.status());
        report
    }
}

/// Binds the status port (failing now, not later, when it is taken) and serves it over TLS.
pub async fn serve(
    ctx: Arc<Context>,
    archiver: Option<Arc<Archiver>>,
    state: SharedState,
    observed: watch::Receiver<Observation>,
) -> Result<(), Error> {
    let port = ctx.args.status_port;
    let listener = TcpListener::bind(("0.0.0.0", port))
        .await
        .map_err(Error::io(format!("binding the status port {port}")))?;
    let acceptor = TlsAcceptor::from(crate::status_tls::server_config(&ctx.args.tls_dir())?);
    let token = StatusToken::new(ctx.args.status_token_file.clone());
    let app = axum::Router::new()
        .route("/status", get(status))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/archive/check", post(archive_check))
        .with_state(App {
            ctx,
            archiver,
            state,
            observed,
            token,
        });
    tokio::spawn(accept(listener, acceptor, app));
    Ok(())
}

/// Accepts connections, at most [`MAX_CONNECTIONS`] at a time, each on its own task.
async fn accept(listener: TcpListener, acceptor: TlsAcceptor, app: axum::Router) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, say: the next accept may succeed; do not spin.
                tracing::warn!(error = %e, "status port: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "status port: TLS handshake refused");
                    return;
                }
                Err(_) => return,
            };
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HANDSHAKE_TIMEOUT)
                .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app));
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
        });
    }
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
