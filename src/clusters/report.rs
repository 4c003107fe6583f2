//! Making a cluster's reconcile visible: its status (computed by `status`, written only when it
//! changed) and its Events.

use kube::runtime::events::Event;
use tracing::warn;

use super::status::{self, Outcome};
use crate::crd::PostgreSQL;
use crate::error::{Error, Result};
use crate::resources::Cluster;
use crate::runtime::events::{self, warning};
use crate::runtime::{Context, status::now};

/// Writes the status for `outcome` when it differs from the current one; returns whether it did.
pub async fn update_status(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    outcome: &Outcome,
    ctx: &Context,
) -> Result<bool> {
    let status = status::compute(
        pg.status.as_ref(),
        cluster,
        pg.metadata.generation,
        outcome,
        &now(),
    );
    crate::runtime::status::write(&ctx.client, pg, pg.status.as_ref(), &status).await
}

/// Publishes `event` about `pg`.
pub async fn publish(ctx: &Context, pg: &PostgreSQL, event: Event) {
    events::publish(&ctx.recorder, pg, event).await;
}

/// Makes a failed reconcile visible: a Warning Event and, when possible, a False Ready
/// condition carrying the reason. Best effort: the error itself is what gets retried.
pub async fn report_error(pg: &PostgreSQL, ctx: &Context, error: &Error) {
    let event = warning(error.reason(), "Reconcile", error.to_string());
    publish(ctx, pg, event).await;
    let Ok(cluster) = Cluster::new(pg) else {
        return;
    };
    let outcome = Outcome::Failed {
        reason: error.reason(),
        message: error.to_string(),
    };
    if let Err(e) = update_status(pg, &cluster, &outcome, ctx).await {
        warn!(cluster = %cluster.name, error = %e, "could not record the failure in the status");
    }
}
