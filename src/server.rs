//! The HTTP endpoints: `/metrics` for Prometheus, `/healthz` for liveness and `/readyz`, which is
//! ready only while the API server answers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use kube::Client;

use crate::metrics::Metrics;

#[derive(Clone)]
struct AppState {
    client: Client,
    metrics: Arc<Metrics>,
}

/// Serves the endpoints on `addr` until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    client: Client,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(AppState { client, metrics });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

async fn ready(State(state): State<AppState>) -> impl IntoResponse {
    match tokio::time::timeout(Duration::from_secs(3), state.client.apiserver_version()).await {
        Ok(Ok(_)) => (StatusCode::OK, "ok".to_owned()),
        Ok(Err(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("API server error: {e}"),
        ),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "API server did not answer in 3s".to_owned(),
        ),
    }
}
