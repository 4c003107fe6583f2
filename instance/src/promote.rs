//! Promotion of the local standby once its pod holds the Lease. Asked for without waiting: a
//! promotion ends only after the standby replayed what it received, which can take long (the
//! target is chosen by *received* WAL); the supervisor follows it tick by tick from what the
//! server says (`monitor`), fencing it if the Lease moves on meanwhile.

use crate::context::Context;
use crate::error::Error;
use crate::sql::connect;

/// `pg_promote(wait => false)`: asks the startup process to end recovery.
pub async fn request(ctx: &Context) -> Result<(), Error> {
    let client = connect(ctx, "postgres").await?;
    let asked: bool = client
        .query_one("SELECT pg_promote(wait => false)", &[])
        .await
        .map_err(Error::sql("pg_promote"))?
        .get(0);
    if !asked {
        return Err(Error::State(
            "pg_promote refused to signal the promotion".into(),
        ));
    }
    Ok(())
}

/// A checkpoint on the new timeline, in the background (the supervisor must stay free to
/// fence). Promotion does not checkpoint, so the control file still names the old timeline;
/// before PostgreSQL 16, pg_rewind against such a source finds "the same timeline" and rewinds
/// nothing, leaving the former primary unable to follow. Members wait for it before rewinding
/// (rewind.rs).
pub fn checkpoint_after(ctx: std::sync::Arc<Context>) {
    tokio::spawn(async move {
        let checkpoint = async {
            let client = connect(&ctx, "postgres").await?;
            client
                .batch_execute("CHECKPOINT")
                .await
                .map_err(Error::sql("CHECKPOINT after the promotion"))
        };
        match checkpoint.await {
            Ok(()) => tracing::info!("checkpointed the new timeline"),
            Err(e) => tracing::warn!(error = %e, "checkpoint after promotion"),
        }
    });
}
