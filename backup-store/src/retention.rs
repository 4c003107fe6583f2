//! Retention: which complete backups `prune` deletes.
//!
//! `keep` and `max_age` are both limits: a backup is deleted when it is beyond the newest
//! `keep` OR older than `max_age`. The newest complete backup is never deleted.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub backup_id: String,
    pub completed_at: jiff::Timestamp,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Policy {
    pub keep: Option<usize>,
    pub max_age: Option<Duration>,
    /// Base backups and their WAL: see [`crate::recovery_window`]. Without it, both stay.
    pub recovery_window: Option<Duration>,
}

/// Sorts newest first; ties broken by id so that every selection is deterministic.
pub(crate) fn newest_first(backups: &mut [Candidate]) {
    backups.sort_by(|a, b| {
        b.completed_at
            .cmp(&a.completed_at)
            .then_with(|| b.backup_id.cmp(&a.backup_id))
    });
}

/// Returns the backups to delete, oldest first.
pub fn select_for_deletion(
    mut backups: Vec<Candidate>,
    policy: Policy,
    now: jiff::Timestamp,
) -> Vec<Candidate> {
    newest_first(&mut backups);
    let mut doomed: Vec<Candidate> = backups
        .into_iter()
        .enumerate()
        .filter(|(rank, b)| {
            if *rank == 0 {
                return false;
            }
            let beyond_keep = policy.keep.is_some_and(|k| *rank >= k);
            let too_old = policy.max_age.is_some_and(|age| {
                let age_secs = i64::try_from(age.as_secs()).unwrap_or(i64::MAX);
                now.as_second().saturating_sub(b.completed_at.as_second()) > age_secs
            });
            beyond_keep || too_old
        })
        .map(|(_, b)| b)
        .collect();
    doomed.reverse();
    doomed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids selected for deletion among backups given as (id, days ago), under `keep` and a
    /// maximum age in days: the cases below differ only in these data.
    fn selected(
        backups: &[(&str, i64)],
        keep: Option<usize>,
        max_age_days: Option<u64>,
    ) -> Vec<String> {
        let now = jiff::Timestamp::now();
        let all = backups
            .iter()
            .map(|(id, days_ago)| Candidate {
                backup_id: id.to_string(),
                completed_at: now - jiff::SignedDuration::from_hours(24 * days_ago),
            })
            .collect();
        let policy = Policy {
            keep,
            max_age: max_age_days.map(|days| Duration::from_secs(days * 86_400)),
            recovery_window: None,
        };
        select_for_deletion(all, policy, now)
            .into_iter()
            .map(|c| c.backup_id)
            .collect()
    }

    #[test]
    fn keep_deletes_oldest_first() {
        let all = [("b", 2), ("d", 0), ("a", 3), ("c", 1)];
        assert_eq!(selected(&all, Some(2), None), ["a", "b"]);
    }

    #[test]
    fn max_age_never_deletes_newest() {
        assert_eq!(selected(&[("a", 40), ("b", 35)], None, Some(30)), ["a"]);
    }

    #[test]
    fn keep_zero_still_keeps_newest() {
        assert_eq!(selected(&[("a", 1), ("b", 0)], Some(0), None), ["a"]);
    }

    #[test]
    fn both_limits_apply() {
        let all = [("a", 10), ("b", 5), ("c", 2), ("d", 1)];
        assert_eq!(selected(&all, Some(3), Some(4)), ["a", "b"]);
    }

    #[test]
    fn no_policy_deletes_nothing() {
        assert!(selected(&[("a", 100), ("b", 0)], None, None).is_empty());
    }
}
