//! Promotion of the local standby once its pod holds the Lease.

use crate::context::Context;
use crate::error::Error;
use crate::sql::connect;

/// `pg_promote(wait => true)`: returns once the server accepts writes on its new timeline. The
/// checkpoint that follows runs in the background: the supervisor must be free to fence.
pub async fn promote(ctx: &Context) -> Result<(), Error> {
    let client = connect(ctx, "postgres").await?;
    let promoted: bool = client
        .query_one("SELECT pg_promote(wait => true, wait_seconds => 60)", &[])
        .await
        .map_err(Error::sql("pg_promote"))?
        .get(0);
    if !promoted {
        return Err(Error::State("pg_promote did not finish within 60 s".into()));
    }
    // Promotion does not checkpoint, so the control file still names the old timeline; before
    // PostgreSQL 16, pg_rewind against such a source finds "the same timeline" and rewinds
    // nothing, leaving the former primary unable to follow.
    // Members wait for it before rewinding (rewind.rs).
    tokio::spawn(async move {
        match client.batch_execute("CHECKPOINT").await {
            Ok(()) => tracing::info!("checkpointed the new timeline"),
            Err(e) => tracing::warn!(error = %e, "checkpoint after promotion"),
        }
    });
    Ok(())
}
