//! The HTTP endpoint the operator reads: `GET /status` (JSON, `report`; docs/replication.md),
//! `GET /healthz` (the manager runs), `GET /readyz` (PostgreSQL accepts connections in the role
//! the Lease gives), `GET /metrics` (Prometheus, `metrics`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::routing::get;
use tokio::sync::watch;

use crate::archiver::Archiver;
use crate::context::Context;
use crate::error::Error;
use crate::monitor::Observation;
use crate::report::{SharedState, StatusReport, report};

#[derive(Clone)]
struct App {
    ctx: Arc<Context>,
    archiver: Option<Arc<Archiver>>,
    state: SharedState,
    observed: watch::Receiver<Observation>,
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

/// Binds the status port (failing now, not later, when it is taken) and serves it.
pub async fn serve(
    ctx: Arc<Context>,
    archiver: Option<Arc<Archiver>>,
    state: SharedState,
    observed: watch::Receiver<Observation>,
) -> Result<(), Error> {
    let port = ctx.args.status_port;
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
        .await
        .map_err(Error::io(format!("binding the status port {port}")))?;
    let app = axum::Router::new()
        .route("/status", get(status))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(App {
            ctx,
            archiver,
            state,
            observed,
        });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "status server stopped");
        }
    });
    Ok(())
}

// Serialized here rather than with axum's `json` feature, which would add crates to the tree.
async fn status(State(app): State<App>) -> ([(header::HeaderName, &'static str); 1], String) {
    let body = serde_json::to_string(&app.report().await).unwrap_or_else(|_| "{}".into());
    ([(header::CONTENT_TYPE, "application/json")], body)
}

async fn metrics(State(app): State<App>) -> ([(header::HeaderName, &'static str); 1], String) {
    let report = app.report().await;
    let observed = app.observed.borrow().clone();
    let volume = crate::metrics::volume(app.ctx.pgdata());
    let body = crate::metrics::render(&report, &observed, volume);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

async fn readyz(State(app): State<App>) -> (StatusCode, &'static str) {
    if app.report().await.ready {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}
