//! A checkpoint asked for in the background (the supervisor must stay free to fence), once per
//! postmaster that serves as primary:
//! - after a promotion, the control file still names the old timeline until a checkpoint;
//!   before PostgreSQL 16, pg_rewind against such a source finds "the same timeline" and
//!   rewinds nothing, leaving the former primary unable to follow (members wait for it before
//!   rewinding, rewind.rs);
//! - after any other start as primary, the checkpointer may be asleep for `checkpoint_timeout`:
//!   it is started before the startup process ends, computes its sleep while recovery is still
//!   in progress (when `archive_timeout` does not bound it), and after a clean start nothing
//!   wakes it. Until then no segment is closed by time, so the archive lags by up to 5 minutes,
//!   not `archive_timeout`. A checkpoint wakes it (and after a clean start costs nothing).

use std::sync::Arc;

use crate::context::Context;
use crate::error::Error;
use crate::sql::connect;

/// Why the checkpoint is asked for, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Promotion,
    Start,
}

pub fn spawn(ctx: Arc<Context>, after: After) {
    tokio::spawn(async move {
        let what = match after {
            After::Promotion => "CHECKPOINT after the promotion",
            After::Start => "CHECKPOINT after the start",
        };
        let checkpoint = async {
            let client = connect(&ctx, "postgres").await?;
            client
                .batch_execute("CHECKPOINT")
                .await
                .map_err(Error::sql(what))
        };
        match (checkpoint.await, after) {
            (Ok(()), After::Promotion) => tracing::info!("checkpointed the new timeline"),
            (Ok(()), After::Start) => tracing::info!("checkpointed after the start"),
            (Err(e), _) => tracing::warn!(error = %e, "{what}"),
        }
    });
}
