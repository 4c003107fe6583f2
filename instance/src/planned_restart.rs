//! The primary restarted in place to take lowered hot-standby settings. A standby refuses to
//! run with a lower `max_connections` (or the four others of `HOT_STANDBY_SETTINGS`) than its
//! primary, so a rollout that lowers one cannot go replicas first: the primary takes the new
//! values first, with a fast shutdown and a start while it keeps the Lease (a few seconds
//! without writes, no failover), and the operator's rollout restarts the replicas only once the
//! primary reports the lower values (docs/src/design/replication.md, "Rolling updates").

use std::time::{Duration, Instant};

use crate::postmaster::Postmaster;

/// How long the fast shutdown may take before it becomes an immediate one.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(60);

/// A restart in place in progress, from the fast shutdown until the postmaster exits.
#[derive(Debug, Default)]
pub struct PlannedRestart {
    since: Option<Instant>,
    hurried: bool,
}

impl PlannedRestart {
    /// For a running primary whose configuration files now give `lowered` settings lower
    /// values: starts the fast shutdown (the supervisor starts it again, as primary, once it
    /// exited) and returns the note for its Event. A shutdown past its limit is hurried.
    pub fn consider(&mut self, pm: &Postmaster, lowered: &[String]) -> Option<String> {
        match self.since {
            Some(since) => {
                if since.elapsed() > SHUTDOWN_LIMIT && !self.hurried {
                    tracing::warn!("the fast shutdown for lowered settings is slow: immediate");
                    pm.signal(libc::SIGQUIT);
                    self.hurried = true;
                }
                None
            }
            None if lowered.is_empty() => None,
            None => {
                pm.signal(libc::SIGINT);
                self.since = Some(Instant::now());
                Some(restart_note(lowered))
            }
        }
    }

    /// The postmaster stopped: whether this restart had asked it to (then forgotten).
    pub fn ended(&mut self) -> bool {
        self.hurried = false;
        self.since.take().is_some()
    }
}

fn restart_note(lowered: &[String]) -> String {
    format!(
        "restarting the primary in place to take the lowered {}: replicas may not run lower \
         values than their primary, so it goes first",
        lowered.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_names_the_lowered_settings() {
        let note = restart_note(&["max_connections".into(), "max_wal_senders".into()]);
        assert!(note.contains("max_connections, max_wal_senders"), "{note}");
    }

    #[test]
    fn only_a_restart_it_asked_for_ends_as_planned() {
        let mut restart = PlannedRestart::default();
        assert!(!restart.ended());
        restart.since = Some(Instant::now());
        assert!(restart.ended());
        assert!(!restart.ended(), "forgotten once ended");
    }
}
