//! Since when a standby has not streamed from the primary it follows now. The grace before a
//! standby counts as stalled (and is rewound, or cloned again) runs from the later of the
//! stream's end and the moment the Lease named its current primary (holder and address): a
//! failover, or the holder's pod coming back at a new IP, is a repoint, not a stall. Measured
//! on real pods: with the clock left running across a failover, a standby that had lost its
//! stream to the previous primary 30 s before counted as stalled 7 s after the failover,
//! re-cloned (its rewind found nothing to rewind), and when the new primary was lost next, the
//! cluster had one replica with data instead of two and `required` durability blocked the
//! failover for good.

use std::time::Instant;

use crate::monitor::ServerFacts;

/// Whether a server counts as streaming, from what it answered (`facts`) and whether its
/// postmaster was started as a standby. A primary streams nothing and never stalls. A standby
/// that answers nothing has not reached a consistent state (or lost its monitor for a moment,
/// which the grace absorbs): it counts as not streaming, so that one whose primary cannot give
/// it the WAL or timeline history it needs is rewound or cloned instead of staying "starting
/// up" for good (found by the failover benchmark: a primary cloned after a timeline began lacks
/// that timeline's history file, and a standby from before it could never catch up).
pub fn streams(facts: Option<&ServerFacts>, standby: bool) -> bool {
    match facts {
        Some(f) if f.in_recovery => f.wal_receiver.as_deref() == Some("streaming"),
        Some(_) => true,
        None => !standby,
    }
}

/// The primary a standby follows: the Lease's holder and its published address.
pub type Following = Option<(String, Option<String>)>;

#[derive(Debug, Default)]
pub struct StreamingClock {
    since: Option<Instant>,
    following: Following,
}

impl StreamingClock {
    /// One observation at `now`: whether the WAL receiver streams, and whom the Lease says to
    /// follow.
    pub fn observe(&mut self, streaming: bool, following: Following, now: Instant) {
        let changed = self.following != following;
        self.following = following;
        if streaming {
            self.since = None;
        } else if changed {
            self.since = Some(now);
        } else {
            self.since.get_or_insert(now);
        }
    }

    /// Since when the standby has not streamed from its current primary (`None`: it streams).
    pub fn since(&self) -> Option<Instant> {
        self.since
    }

    /// A new postmaster, or none: nothing has stalled yet.
    pub fn reset(&mut self) {
        self.since = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn holder(name: &str, ip: &str) -> Following {
        Some((name.to_owned(), Some(ip.to_owned())))
    }

    #[test]
    fn a_failover_restarts_the_grace_a_lost_stream_had_used_up() {
        let start = Instant::now();
        let later = |s: u64| start + Duration::from_secs(s);
        let mut clock = StreamingClock::default();
        clock.observe(true, holder("demo-1", "10.0.0.11"), start);
        assert_eq!(clock.since(), None);
        // demo-1 lost: no stream from t=1 on.
        clock.observe(false, holder("demo-1", "10.0.0.11"), later(1));
        clock.observe(false, holder("demo-1", "10.0.0.11"), later(20));
        assert_eq!(clock.since(), Some(later(1)));
        // demo-0 promoted at t=25: the grace starts again there, not at t=1.
        clock.observe(false, holder("demo-0", "10.0.0.10"), later(25));
        clock.observe(false, holder("demo-0", "10.0.0.10"), later(32));
        assert_eq!(clock.since(), Some(later(25)));
        // The holder's pod back at a new IP: a repoint too.
        clock.observe(false, holder("demo-0", "10.0.0.20"), later(40));
        assert_eq!(clock.since(), Some(later(40)));
        clock.observe(true, holder("demo-0", "10.0.0.20"), later(41));
        assert_eq!(clock.since(), None);
    }

    #[test]
    fn a_standby_that_answers_nothing_is_not_streaming_and_a_primary_never_stalls() {
        let standby = |receiver: Option<&str>| ServerFacts {
            in_recovery: true,
            wal_receiver: receiver.map(str::to_owned),
            ..ServerFacts::default()
        };
        assert!(streams(Some(&standby(Some("streaming"))), true));
        assert!(!streams(Some(&standby(Some("waiting"))), true));
        assert!(!streams(Some(&standby(None)), true));
        // Started as a standby and not answering: still starting up, or never will.
        assert!(!streams(None, true));
        // A primary, answering or not.
        assert!(streams(None, false));
        assert!(streams(Some(&ServerFacts::default()), false));
    }

    #[test]
    fn a_stream_lost_under_the_same_primary_keeps_its_start() {
        let start = Instant::now();
        let mut clock = StreamingClock::default();
        clock.observe(false, holder("demo-0", "10.0.0.10"), start);
        clock.observe(
            false,
            holder("demo-0", "10.0.0.10"),
            start + Duration::from_secs(31),
        );
        assert_eq!(clock.since(), Some(start));
        clock.reset();
        assert_eq!(clock.since(), None);
    }
}
