//! The HTTP endpoint the operator reads: `GET /status` (JSON, `report`; docs/replication.md),
//! `GET /healthz` (the manager runs), `GET /readyz` (PostgreSQL accepts connections in the role
//! the Lease gives), `GET /metrics` (Prometheus, `metrics`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::routing::get;

use crate::context::Context;
use crate::error::Error;
use crate::report::{ManagerState, SharedState, report};

#[derive(Clone)]
struct App {
    ctx: Arc<Context>,
    state: SharedState,
}

impl App {
    fn snapshot(&self) -> ManagerState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Binds the status port (failing now, not later, when it is taken) and serves it.
pub async fn serve(ctx: Arc<Context>, state: SharedState) -> Result<(), Error> {
    let port = ctx.args.status_port;
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
        .await
        .map_err(Error::io(format!("binding the status port {port}")))?;
    let app = axum::Router::new()
        .route("/status", get(status))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(App { ctx, state });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "status server stopped");
        }
    });
    Ok(())
}

// Serialized here rather than with axum's `json` feature, which would add crates to the tree.
async fn status(State(app): State<App>) -> ([(header::HeaderName, &'static str); 1], String) {
    let report = report(&app.ctx, &app.snapshot()).await;
    let body = serde_json::to_string(&report).unwrap_or_else(|_| "{}".into());
    ([(header::CONTENT_TYPE, "application/json")], body)
}

async fn metrics(State(app): State<App>) -> ([(header::HeaderName, &'static str); 1], String) {
    let report = report(&app.ctx, &app.snapshot()).await;
    let standbys = match crate::metrics::standbys(&app.ctx, &report).await {
        Ok(standbys) => standbys,
        Err(e) => {
            tracing::debug!(error = %e, "standbys for /metrics");
            Vec::new()
        }
    };
    let body = crate::metrics::render(&report, &standbys);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

async fn readyz(State(app): State<App>) -> (StatusCode, &'static str) {
    if report(&app.ctx, &app.snapshot()).await.ready {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}
