//! Invariants over what writers saw during a fault, as pure functions of their acknowledgements
//! (and of when the operator handed the Lease over): commits an isolated primary accepted after
//! another instance was promoted, two primaries accepting writes at once, the gap a change
//! left. The scenarios in e2e/tests/replication_faults.rs assert them.

use std::time::{Duration, Instant, SystemTime};

use crate::replication::{Ack, forked};

/// The acknowledgements received after `at`. A commit is acknowledged after it happened, so
/// this over-counts commits after `at`, never under-counts them: zero is a proof.
pub fn acked_after(acks: &[Ack], at: Instant) -> Vec<Ack> {
    acks.iter().copied().filter(|a| a.at > at).collect()
}

/// The acknowledgements of several writers in the order they arrived.
pub fn merged(writers: &[&[Ack]]) -> Vec<Ack> {
    let mut all: Vec<Ack> = writers.iter().flat_map(|w| w.iter().copied()).collect();
    all.sort_by_key(|a| a.at);
    all
}

/// Two primaries at once: across all writers (through `-rw` or pinned to one pod), a commit on
/// an older timeline acknowledged after one on a newer timeline. `None` when the old primary
/// stopped accepting writes before the new one accepted its first.
pub fn split_brain(writers: &[&[Ack]]) -> Option<(Ack, Ack)> {
    forked(&merged(writers))
}

/// The first acknowledgement on a timeline newer than the first acknowledgement's: when the
/// promoted instance was already accepting writes.
pub fn first_on_new_timeline(acks: &[Ack]) -> Option<Ack> {
    let first = acks.first()?.timeline;
    acks.iter().copied().find(|a| a.timeline > first)
}

/// The longest time without an acknowledgement within `[from, to]`: from the last
/// acknowledgement before `from` (or `from`) to the first after `to` (or `to`), every span
/// between consecutive acknowledgements in between. What a planned change cost the writer.
pub fn longest_gap_within(acks: &[Ack], from: Instant, to: Instant) -> Duration {
    let start = acks
        .iter()
        .rev()
        .find(|a| a.at <= from)
        .map_or(from, |a| a.at);
    let end = acks.iter().find(|a| a.at >= to).map_or(to, |a| a.at);
    let mut marks = vec![start];
    marks.extend(
        acks.iter()
            .map(|a| a.at)
            .filter(|at| *at > start && *at < end),
    );
    marks.push(end);
    marks
        .windows(2)
        .map(|pair| pair[1].saturating_duration_since(pair[0]))
        .max()
        .unwrap_or_default()
}

/// The monotonic instant of wall-clock time `wall` (a timestamp the operator wrote, on this
/// same machine), given one reading of both clocks taken together.
pub fn instant_of(wall: SystemTime, reading: (Instant, SystemTime)) -> Instant {
    let (now, now_wall) = reading;
    match now_wall.duration_since(wall) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(ahead) => now + ahead.duration(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(n: i64, timeline: i64, at: Instant) -> Ack {
        Ack { n, timeline, at }
    }

    fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn commits_after_the_promotion_are_those_acknowledged_after_it() {
        let t0 = Instant::now();
        let isolated = [
            ack(1, 1, ms(t0, 0)),
            ack(2, 1, ms(t0, 100)),
            ack(3, 1, ms(t0, 900)),
        ];
        let promoted = ms(t0, 500);
        let late: Vec<i64> = acked_after(&isolated, promoted)
            .iter()
            .map(|a| a.n)
            .collect();
        assert_eq!(late, [3]);
        assert!(acked_after(&isolated[..2], promoted).is_empty());
    }

    #[test]
    fn an_old_primary_accepting_after_the_new_one_is_split_brain() {
        let t0 = Instant::now();
        let through_rw = [ack(1, 1, ms(t0, 0)), ack(2, 2, ms(t0, 600))];
        let pinned = [ack(10, 1, ms(t0, 100)), ack(11, 1, ms(t0, 700))];
        let (newer, older) = split_brain(&[&through_rw, &pinned]).expect("a fork");
        assert_eq!((newer.n, older.n), (2, 11));
        // The pinned writer's last commit before the new primary's first: no fork.
        assert!(split_brain(&[&through_rw, &pinned[..1]]).is_none());
        let order: Vec<i64> = merged(&[&through_rw, &pinned])
            .iter()
            .map(|a| a.n)
            .collect();
        assert_eq!(order, [1, 10, 2, 11]);
    }

    #[test]
    fn the_new_timeline_starts_at_its_first_acknowledgement() {
        let t0 = Instant::now();
        let acks = [
            ack(1, 1, ms(t0, 0)),
            ack(2, 1, ms(t0, 10)),
            ack(3, 2, ms(t0, 20)),
        ];
        assert_eq!(first_on_new_timeline(&acks).map(|a| a.n), Some(3));
        assert!(first_on_new_timeline(&acks[..2]).is_none());
        assert!(first_on_new_timeline(&[]).is_none());
    }

    #[test]
    fn a_gap_within_a_window_counts_from_the_last_ack_before_it_to_the_first_after() {
        let t0 = Instant::now();
        let acks = [
            ack(1, 1, ms(t0, 0)),
            ack(2, 1, ms(t0, 300)),
            ack(3, 1, ms(t0, 1_300)),
            ack(4, 1, ms(t0, 1_400)),
            ack(5, 1, ms(t0, 3_000)),
        ];
        // Window [500, 1400]: spans 300→1300 (1 s) and 1300→1400.
        assert_eq!(
            longest_gap_within(&acks, ms(t0, 500), ms(t0, 1_400)),
            Duration::from_secs(1)
        );
        // Through the end: 1400→3000 once `to` is past 1400.
        assert_eq!(
            longest_gap_within(&acks, ms(t0, 500), ms(t0, 2_000)),
            Duration::from_millis(1_600)
        );
        // No acknowledgement at all: the whole window.
        assert_eq!(
            longest_gap_within(&[], ms(t0, 0), ms(t0, 700)),
            Duration::from_millis(700)
        );
    }

    #[test]
    fn wall_clock_times_map_onto_the_monotonic_clock() {
        let now = Instant::now();
        let wall = SystemTime::now();
        let reading = (
            now + Duration::from_secs(10),
            wall + Duration::from_secs(10),
        );
        assert_eq!(instant_of(wall, reading), now);
        let later = wall + Duration::from_secs(12);
        assert_eq!(instant_of(later, reading), now + Duration::from_secs(12));
    }
}
