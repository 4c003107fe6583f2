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
//!
//! A failed checkpoint is asked for again ([`RETRY_DELAYS`]) while the server stays primary.

use std::sync::Arc;
use std::time::Duration;

use crate::context::Context;
use crate::error::Error;
use crate::sql::connect;

/// Why the checkpoint is asked for, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Promotion,
    Start,
}

/// What an attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Done {
    Checkpointed,
    /// The server is in recovery again (demoted): its checkpoint is no longer wanted.
    NotPrimary,
}

/// The waits between attempts: a checkpoint that failed (the server still starting, no
/// connection slot, a timeout) is asked for again, for about four minutes, where it was once
/// marked done before it ran and never retried.
const RETRY_DELAYS: [Duration; 8] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(15),
    Duration::from_secs(30),
    Duration::from_secs(60),
    Duration::from_secs(120),
];

/// Runs `attempt` until it succeeds, waiting `delays` between failures; the last error when
/// every attempt failed.
async fn until_done<F, Fut>(mut attempt: F, delays: &[Duration]) -> Result<Done, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Done, Error>>,
{
    let mut waits = delays.iter();
    loop {
        match attempt().await {
            Ok(done) => return Ok(done),
            Err(e) => match waits.next() {
                Some(wait) => {
                    tracing::debug!(error = %e, ?wait, "checkpoint failed, asked again");
                    tokio::time::sleep(*wait).await;
                }
                None => return Err(e),
            },
        }
    }
}

async fn checkpoint(ctx: &Context, what: &'static str) -> Result<Done, Error> {
    let client = connect(ctx, "postgres").await?;
    let recovering: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .map_err(Error::sql(what))?
        .get(0);
    if recovering {
        return Ok(Done::NotPrimary);
    }
    client
        .batch_execute("CHECKPOINT")
        .await
        .map_err(Error::sql(what))?;
    Ok(Done::Checkpointed)
}

pub fn spawn(ctx: Arc<Context>, after: After) {
    tokio::spawn(async move {
        let what = match after {
            After::Promotion => "CHECKPOINT after the promotion",
            After::Start => "CHECKPOINT after the start",
        };
        let done = until_done(|| checkpoint(&ctx, what), &RETRY_DELAYS).await;
        match (done, after) {
            (Ok(Done::Checkpointed), After::Promotion) => {
                tracing::info!("checkpointed the new timeline")
            }
            (Ok(Done::Checkpointed), After::Start) => {
                tracing::info!("checkpointed after the start")
            }
            (Ok(Done::NotPrimary), _) => tracing::info!("{what}: in recovery again, not needed"),
            (Err(e), _) => tracing::warn!(error = %e, "{what}: failed, given up"),
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn failed() -> Error {
        Error::State("no connection slot".to_owned())
    }

    #[tokio::test]
    async fn a_failed_checkpoint_is_asked_for_again_until_it_runs() {
        let calls = AtomicUsize::new(0);
        let attempt = || async {
            match calls.fetch_add(1, Ordering::Relaxed) {
                0 | 1 => Err(failed()),
                _ => Ok(Done::Checkpointed),
            }
        };
        let delays = [Duration::ZERO; 8];
        assert_eq!(
            until_done(attempt, &delays).await.unwrap(),
            Done::Checkpointed
        );
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn it_gives_up_after_the_last_wait() {
        let calls = AtomicUsize::new(0);
        let attempt = || async {
            calls.fetch_add(1, Ordering::Relaxed);
            Err::<Done, _>(failed())
        };
        assert!(until_done(attempt, &[Duration::ZERO; 3]).await.is_err());
        assert_eq!(calls.load(Ordering::Relaxed), 4);
    }
}
