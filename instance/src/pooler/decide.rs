//! What the pooler does next, from the Lease and what it routes to now (pure).
//!
//! - A switchover asked (`tusk.dev/switchover-to` names another member): pause, so that
//!   transactions in flight finish and new ones wait in PgBouncer.
//! - The Lease names another holder: pause at once (a failover: new transactions wait rather
//!   than fail against the lost primary), and route to it once its server has left recovery;
//!   resume then.
//! - A pause that outlasts its limit is resumed towards whoever holds the Lease then: a
//!   stalled switchover never hangs applications.
//! - The first route needs no check: there is nothing better to send clients to.

use std::time::{Duration, Instant};

/// What the pooler routes to and whether it holds clients.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routing {
    /// The member `[databases]` names.
    pub routed: Option<String>,
    /// Since when clients have been held (PAUSE).
    pub paused_since: Option<Instant>,
}

/// The Lease as last seen, and whether its holder's server accepts writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    pub holder: Option<String>,
    pub switchover_to: Option<String>,
    /// The holder's server answered that it is not in recovery.
    pub holder_writable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// Hold new transactions; let those in flight finish.
    Pause,
    /// Route to this member, close the server connections to the old one, and resume.
    Route(String),
    /// Let held clients go on where the route already points.
    Resume,
}

pub fn next(routing: &Routing, observed: &Observed, now: Instant, limit: Duration) -> Action {
    let paused = routing.paused_since;
    let overdue = paused.is_some_and(|since| now.duration_since(since) >= limit);
    let moved = match &observed.holder {
        Some(holder) if routing.routed.as_ref() != Some(holder) => Some(holder),
        _ => None,
    };
    if let Some(holder) = moved {
        return if observed.holder_writable || routing.routed.is_none() || overdue {
            Action::Route(holder.clone())
        } else if paused.is_none() {
            Action::Pause
        } else {
            Action::Nothing
        };
    }
    let asked = observed
        .switchover_to
        .as_ref()
        .is_some_and(|to| routing.routed.as_ref() != Some(to));
    match (paused.is_some(), asked) {
        (false, true) => Action::Pause,
        // The switchover ended where it began (cancelled, or timed out), or took too long.
        (true, false) => Action::Resume,
        (true, true) if overdue => Action::Resume,
        _ => Action::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(30);

    fn routed(to: &str, paused: Option<Instant>) -> Routing {
        Routing {
            routed: Some(to.to_owned()),
            paused_since: paused,
        }
    }

    fn lease(holder: &str, to: Option<&str>, writable: bool) -> Observed {
        Observed {
            holder: Some(holder.to_owned()),
            switchover_to: to.map(str::to_owned),
            holder_writable: writable,
        }
    }

    #[test]
    fn a_planned_switchover_pauses_then_routes_to_the_promoted_target_and_resumes() {
        let now = Instant::now();
        let steady = routed("a-0", None);
        assert_eq!(
            next(&steady, &lease("a-0", None, true), now, LIMIT),
            Action::Nothing
        );
        // Asked: pause while the holder still holds.
        let asked = lease("a-0", Some("a-1"), true);
        assert_eq!(next(&steady, &asked, now, LIMIT), Action::Pause);
        let paused = routed("a-0", Some(now));
        assert_eq!(next(&paused, &asked, now, LIMIT), Action::Nothing);
        // Released (no holder), then handed to a-1 still in recovery: keep holding.
        let released = Observed {
            holder: None,
            switchover_to: Some("a-1".into()),
            holder_writable: false,
        };
        assert_eq!(next(&paused, &released, now, LIMIT), Action::Nothing);
        let promoting = lease("a-1", Some("a-1"), false);
        assert_eq!(next(&paused, &promoting, now, LIMIT), Action::Nothing);
        // Out of recovery: route there (and resume).
        let promoted = lease("a-1", Some("a-1"), true);
        assert_eq!(
            next(&paused, &promoted, now, LIMIT),
            Action::Route("a-1".into())
        );
    }

    #[test]
    fn a_failover_holds_clients_until_the_new_primary_writes() {
        let now = Instant::now();
        let steady = routed("a-0", None);
        let handed = lease("a-2", None, false);
        assert_eq!(next(&steady, &handed, now, LIMIT), Action::Pause);
        let paused = routed("a-0", Some(now));
        assert_eq!(next(&paused, &handed, now, LIMIT), Action::Nothing);
        assert_eq!(
            next(&paused, &lease("a-2", None, true), now, LIMIT),
            Action::Route("a-2".into())
        );
    }

    #[test]
    fn a_stalled_switchover_is_resumed_after_the_limit() {
        let start = Instant::now();
        let paused = routed("a-0", Some(start));
        let asked = lease("a-0", Some("a-1"), true);
        let later = start + LIMIT;
        assert_eq!(next(&paused, &asked, later, LIMIT), Action::Resume);
        // Handed over but never writable: routed to the holder anyway once overdue.
        let stuck = lease("a-1", Some("a-1"), false);
        assert_eq!(
            next(&paused, &stuck, later, LIMIT),
            Action::Route("a-1".into())
        );
    }

    #[test]
    fn a_cancelled_switchover_resumes_where_it_was() {
        let now = Instant::now();
        let paused = routed("a-0", Some(now));
        assert_eq!(
            next(&paused, &lease("a-0", None, true), now, LIMIT),
            Action::Resume
        );
    }

    #[test]
    fn the_first_route_needs_no_check() {
        let now = Instant::now();
        assert_eq!(
            next(&Routing::default(), &lease("a-0", None, false), now, LIMIT),
            Action::Route("a-0".into())
        );
        let nobody = Observed::default();
        assert_eq!(
            next(&Routing::default(), &nobody, now, LIMIT),
            Action::Nothing
        );
    }
}
