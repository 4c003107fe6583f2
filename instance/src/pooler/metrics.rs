//! `GET /metrics` of a pooler pod (port `metrics`, plain HTTP: counts only, no secret): what
//! the pooler did (pauses, reroutes) and PgBouncer's pools as `SHOW POOLS` tells them at the
//! scrape (clients active and waiting, server connections, the longest wait).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::get;
use tokio_postgres::SimpleQueryMessage;

/// What the pooler's loop records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Activity {
    pub paused: bool,
    pub pauses: u64,
    pub reroutes: u64,
    pub last_pause_seconds: f64,
    pub routed: String,
}

/// `SHOW POOLS` summed over every pool; the longest wait is the largest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pools {
    pub clients_active: i64,
    pub clients_waiting: i64,
    pub servers_active: i64,
    pub servers_idle: i64,
    pub max_wait_seconds: f64,
}

impl Pools {
    /// From the rows of `SHOW POOLS` (PgBouncer 1.18's columns, read by name).
    pub fn of(messages: &[SimpleQueryMessage]) -> Self {
        let mut pools = Self::default();
        for message in messages {
            let SimpleQueryMessage::Row(row) = message else {
                continue;
            };
            let number = |column: &str| -> i64 {
                row.try_get(column)
                    .ok()
                    .flatten()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            pools.clients_active += number("cl_active");
            pools.clients_waiting += number("cl_waiting");
            pools.servers_active += number("sv_active");
            pools.servers_idle += number("sv_idle");
            let wait = number("maxwait") as f64 + number("maxwait_us") as f64 / 1e6;
            pools.max_wait_seconds = pools.max_wait_seconds.max(wait);
        }
        pools
    }
}

/// The exposition: the loop's record, and the pools when PgBouncer answered.
pub fn render(activity: &Activity, pools: Option<&Pools>) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: String| {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        );
    };
    metric(
        "tusk_pooler_paused",
        "gauge",
        "1 while the pooler holds new transactions (a switchover or failover in progress).",
        u8::from(activity.paused).to_string(),
    );
    metric(
        "tusk_pooler_pauses_total",
        "counter",
        "Times the pooler held new transactions.",
        activity.pauses.to_string(),
    );
    metric(
        "tusk_pooler_reroutes_total",
        "counter",
        "Times the pooler moved to a new primary.",
        activity.reroutes.to_string(),
    );
    metric(
        "tusk_pooler_last_pause_seconds",
        "gauge",
        "How long the last pause held clients.",
        format!("{:.3}", activity.last_pause_seconds),
    );
    if let Some(pools) = pools {
        metric(
            "tusk_pooler_clients_active",
            "gauge",
            "Client connections paired with a server connection.",
            pools.clients_active.to_string(),
        );
        metric(
            "tusk_pooler_clients_waiting",
            "gauge",
            "Client connections waiting for a server connection.",
            pools.clients_waiting.to_string(),
        );
        metric(
            "tusk_pooler_server_connections",
            "gauge",
            "Server connections in use or idle.",
            (pools.servers_active + pools.servers_idle).to_string(),
        );
        metric(
            "tusk_pooler_max_wait_seconds",
            "gauge",
            "How long the oldest waiting client has waited.",
            format!("{:.3}", pools.max_wait_seconds),
        );
    }
    out
}

#[derive(Clone)]
struct App {
    activity: Arc<Mutex<Activity>>,
    admin: tokio_postgres::Config,
    session: Arc<tokio::sync::Mutex<Option<tokio_postgres::Client>>>,
}

/// Serves `/metrics` on `port`.
pub async fn serve(
    port: u16,
    activity: Arc<Mutex<Activity>>,
    admin: tokio_postgres::Config,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port)).await?;
    let app = axum::Router::new()
        .route("/metrics", get(metrics))
        .with_state(App {
            activity,
            admin,
            session: Arc::default(),
        });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the pooler's metrics endpoint stopped");
        }
    });
    Ok(())
}

async fn metrics(State(app): State<App>) -> String {
    let activity = app.activity.lock().map(|a| a.clone()).unwrap_or_default();
    let pools = show_pools(&app).await;
    render(&activity, pools.as_ref())
}

/// `SHOW POOLS` on the scrape's own admin session (opened again when it broke).
async fn show_pools(app: &App) -> Option<Pools> {
    let mut session = app.session.lock().await;
    if session.as_ref().is_none_or(|c| c.is_closed()) {
        let (client, connection) = app.admin.connect(tokio_postgres::NoTls).await.ok()?;
        tokio::spawn(connection);
        *session = Some(client);
    }
    let rows = session.as_ref()?.simple_query("SHOW POOLS").await.ok()?;
    Some(Pools::of(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charts_alerts_query_only_metrics_the_pooler_exports() {
        let rules = include_str!("../../../deploy/helm/tusk/files/prometheus-rules.yaml");
        let exposition = render(&Activity::default(), Some(&Pools::default()));
        let queried = crate::metrics::queried_metrics(rules, "tusk_pooler_");
        for name in &queried {
            assert!(
                exposition.contains(&format!("# TYPE {name} ")),
                "the chart's alerts query {name}, which the pooler does not export"
            );
        }
        assert!(!queried.is_empty(), "no pooler metric in the rules");
    }

    #[test]
    fn a_paused_pooler_says_so() {
        let activity = Activity {
            paused: true,
            pauses: 3,
            ..Activity::default()
        };
        let text = render(&activity, None);
        assert!(text.contains("tusk_pooler_paused 1\n"));
        assert!(text.contains("tusk_pooler_pauses_total 3\n"));
        assert!(
            !text.contains("clients_waiting"),
            "no pools without PgBouncer's answer"
        );
    }
}
