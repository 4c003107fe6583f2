//! Waiting for a condition with a deadline. Probes are polled; a timeout names what was awaited
//! and what the last probe saw.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::{Failure, Result};

/// How often a probe is repeated: a polling interval, not a synchronisation.
const POLL: Duration = Duration::from_millis(250);

/// What one probe found.
pub enum Check<T> {
    Done(T),
    /// Not yet; what was seen instead (quoted in the timeout message).
    Pending(String),
}

impl Check<()> {
    /// Done when `ok`, else pending with `seen`.
    pub fn when(ok: bool, seen: impl Display) -> Self {
        if ok {
            Check::Done(())
        } else {
            Check::Pending(seen.to_string())
        }
    }
}

/// Polls `probe` until it is done or `timeout` passes. A probe's error counts as "not yet" (the
/// object may not exist yet) and is quoted if it is the last thing seen; a level the run lacks ends the wait.
pub async fn until<T, F, Fut>(what: impl Display, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Check<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last: String;
    loop {
        match probe().await {
            Ok(Check::Done(value)) => return Ok(value),
            Ok(Check::Pending(seen)) => last = seen,
            Err(Failure::Absent(level, reason)) => return Err(Failure::Absent(level, reason)),
            Err(Failure::Fail(message)) => last = format!("error: {message}"),
        }
        if Instant::now() >= deadline {
            let mut last = last;
            if last.len() > 600 {
                let mut cut = 600;
                while !last.is_char_boundary(cut) {
                    cut -= 1;
                }
                last.truncate(cut);
                last.push('…');
            }
            return Err(Failure::Fail(format!(
                "timed out after {}s waiting for {what} (last seen: {last})",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `probe` until it finds nothing left: it lists what is not yet as wanted (objects still
/// present, clusters not Ready, ...), quoted in the timeout message.
pub async fn until_none<D, F, Fut>(what: impl Display, timeout: Duration, mut probe: F) -> Result
where
    D: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Vec<D>>>,
{
    until(what, timeout, || {
        let left = probe();
        async move {
            let left = left.await?;
            let seen: Vec<String> = left.iter().map(ToString::to_string).collect();
            Ok(Check::when(left.is_empty(), seen.join(", ")))
        }
    })
    .await
}
