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
}

/// Returns the backups to delete, oldest first.
pub fn select_for_deletion(
    mut backups: Vec<Candidate>,
    policy: Policy,
    now: jiff::Timestamp,
) -> Vec<Candidate> {
    // Newest first; ties broken by id so the result is deterministic.
    backups.sort_by(|a, b| {
        b.completed_at
            .cmp(&a.completed_at)
            .then_with(|| b.backup_id.cmp(&a.backup_id))
    });
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

    fn c(id: &str, days_ago: i64, now: jiff::Timestamp) -> Candidate {
        Candidate {
            backup_id: id.into(),
            completed_at: now - jiff::SignedDuration::from_hours(24 * days_ago),
        }
    }

    fn ids(v: &[Candidate]) -> Vec<&str> {
        v.iter().map(|c| c.backup_id.as_str()).collect()
    }

    #[test]
    fn keep_deletes_oldest_first() {
        let now = jiff::Timestamp::now();
        let all = vec![
            c("b", 2, now),
            c("d", 0, now),
            c("a", 3, now),
            c("c", 1, now),
        ];
        let policy = Policy {
            keep: Some(2),
            max_age: None,
        };
        assert_eq!(ids(&select_for_deletion(all, policy, now)), ["a", "b"]);
    }

    #[test]
    fn max_age_never_deletes_newest() {
        let now = jiff::Timestamp::now();
        let all = vec![c("a", 40, now), c("b", 35, now)];
        let policy = Policy {
            keep: None,
            max_age: Some(Duration::from_secs(30 * 86_400)),
        };
        assert_eq!(ids(&select_for_deletion(all, policy, now)), ["a"]);
    }

    #[test]
    fn keep_zero_still_keeps_newest() {
        let now = jiff::Timestamp::now();
        let all = vec![c("a", 1, now), c("b", 0, now)];
        let policy = Policy {
            keep: Some(0),
            max_age: None,
        };
        assert_eq!(ids(&select_for_deletion(all, policy, now)), ["a"]);
    }

    #[test]
    fn both_limits_apply() {
        let now = jiff::Timestamp::now();
        let all = vec![
            c("a", 10, now),
            c("b", 5, now),
            c("c", 2, now),
            c("d", 1, now),
        ];
        let policy = Policy {
            keep: Some(3),
            max_age: Some(Duration::from_secs(4 * 86_400)),
        };
        assert_eq!(ids(&select_for_deletion(all, policy, now)), ["a", "b"]);
    }

    #[test]
    fn no_policy_deletes_nothing() {
        let now = jiff::Timestamp::now();
        let all = vec![c("a", 100, now), c("b", 0, now)];
        assert!(select_for_deletion(all, Policy::default(), now).is_empty());
    }
}
