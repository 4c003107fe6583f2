//! Whether a cluster's backups are fresh. A CronJob that skips runs (a stuck Job under
//! `concurrencyPolicy: Forbid`, a controller that is down) produces no failed Backup, so
//! `LastBackupSucceeded` would stay True; this check turns it False with reason `BackupOverdue`.

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::clusters::validate::validate_schedule;
use crate::crd::conditions::BACKUP_SCHEDULED;
use crate::crd::{PostgreSQL, PostgreSQLStatus, SuccessfulBackup};

/// The verdict for one cluster at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Nothing to judge: no schedule, or no reference time yet.
    Unknown,
    /// Fresh until `overdue_at`; the reconcile requeues itself for then.
    Fresh { overdue_at: Timestamp },
    /// A sentence for the `LastBackupSucceeded` condition.
    Overdue { message: String },
}

/// Judges `schedule` (a Kubernetes cron schedule in UTC) at `now`. `since` is the newer of the
/// last success and the moment scheduling started. Backups are overdue once two scheduled runs
/// after `since` have passed, plus half the interval between them for the second run to finish:
/// about twice the schedule's interval, and right for irregular schedules (weekdays only) too.
pub fn check(schedule: &str, since: Option<Timestamp>, now: Timestamp) -> Freshness {
    let Some(since) = since else {
        return Freshness::Unknown;
    };
    let Some((first, second, overdue_at)) = deadline(schedule, since) else {
        return Freshness::Unknown;
    };
    if now < overdue_at {
        return Freshness::Fresh { overdue_at };
    }
    Freshness::Overdue {
        message: format!(
            "no backup has succeeded since {since}, although schedule {schedule:?} was due at \
             {first} and {second}"
        ),
    }
}

/// When the backups of `cluster` become overdue, as its reconcile judges them, unless one
/// succeeds first; only while the schedule runs (`BackupScheduled` True, not suspended), so
/// paused clusters raise no alert. Exported as a metric: an alert needs no cron arithmetic.
pub fn overdue_at(cluster: &PostgreSQL) -> Option<Timestamp> {
    let policy = cluster.spec.backup.as_ref().filter(|b| !b.suspend)?;
    let status = cluster.status.as_ref()?;
    let scheduled = status
        .conditions
        .iter()
        .any(|c| c.type_ == BACKUP_SCHEDULED && c.status == "True");
    if !scheduled {
        return None;
    }
    let since = since(Some(status), status.last_successful_backup.as_ref())?;
    deadline(&policy.schedule, since).map(|(_, _, overdue_at)| overdue_at)
}

/// The two scheduled runs after `since` and the moment backups become overdue.
fn deadline(schedule: &str, since: Timestamp) -> Option<(Timestamp, Timestamp, Timestamp)> {
    let cron = parse(schedule)?;
    let start = DateTime::<Utc>::from_timestamp(since.as_second(), 0)?;
    let mut runs = cron.iter_after(start).filter_map(|t| to_timestamp(&t));
    let (first, second) = (runs.next()?, runs.next()?);
    let grace = SignedDuration::from_secs(second.duration_since(first).as_secs() / 2);
    Some((first, second, second.checked_add(grace).ok()?))
}

/// The first run of `schedule` strictly after `after`; `None` for a schedule `validate` refuses.
/// What `kubectl tusk status` shows as the next backup.
pub fn next_run(schedule: &str, after: Timestamp) -> Option<Timestamp> {
    let start = DateTime::<Utc>::from_timestamp(after.as_second(), 0)?;
    let next = parse(schedule)?.iter_after(start).next()?;
    to_timestamp(&next)
}

/// The schedule as the CronJob controller reads it; `None` for what `validate` refuses.
pub(super) fn parse(schedule: &str) -> Option<Cron> {
    validate_schedule(schedule).ok()?;
    let pattern = match schedule.trim() {
        "@midnight" => "@daily",
        "@annually" => "@yearly",
        other => other,
    };
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    parser.parse(pattern).ok()
}

/// The reference time for [`check`]: the newer of the last success and the moment the
/// `BackupScheduled` condition turned True, so that a new or resumed schedule gets its first
/// runs before it can be overdue.
pub fn since(
    status: Option<&PostgreSQLStatus>,
    last_success: Option<&SuccessfulBackup>,
) -> Option<Timestamp> {
    let scheduled = status.and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == BACKUP_SCHEDULED && c.status == "True")
            .map(|c| c.last_transition_time.0)
    });
    scheduled.max(last_success.map(|b| b.completed_at.0))
}

fn to_timestamp(time: &DateTime<Utc>) -> Option<Timestamp> {
    Timestamp::from_second(time.timestamp()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn fresh_until(overdue_at: &str) -> Freshness {
        Freshness::Fresh {
            overdue_at: at(overdue_at),
        }
    }

    #[test]
    fn next_run_is_the_first_occurrence_after_the_moment() {
        let next = next_run("0 2 * * *", at("2026-11-24T02:00:00Z"));
        assert_eq!(next, Some(at("2026-11-25T02:00:00Z")));
        assert_eq!(next_run("not a schedule", at("2026-11-24T02:00:00Z")), None);
    }

    #[test]
    fn daily_backups_are_overdue_after_two_missed_runs_and_half_a_day() {
        let since = Some(at("2026-11-20T02:10:00Z"));
        let fresh = check("0 2 * * *", since, at("2026-11-22T13:59:59Z"));
        assert_eq!(fresh, fresh_until("2026-11-22T14:00:00Z"));
        let Freshness::Overdue { message } = check("0 2 * * *", since, at("2026-11-22T14:00:00Z"))
        else {
            panic!("overdue expected");
        };
        assert_eq!(
            message,
            "no backup has succeeded since 2026-11-20T02:10:00Z, although schedule \"0 2 * * *\" \
             was due at 2026-11-21T02:00:00Z and 2026-11-22T02:00:00Z"
        );
    }

    #[test]
    fn hourly_and_macro_schedules() {
        let since = Some(at("2026-11-20T02:05:00Z"));
        let hourly = check("@hourly", since, at("2026-11-20T02:06:00Z"));
        assert_eq!(hourly, fresh_until("2026-11-20T04:30:00Z"));
        assert!(matches!(
            check("@midnight", since, at("2026-11-22T12:00:00Z")),
            Freshness::Overdue { .. }
        ));
    }

    #[test]
    fn weekday_schedules_count_runs_not_days() {
        // Friday's success: the weekend has no runs, so Monday's and Tuesday's are the two.
        let friday = Some(at("2026-11-20T02:10:00Z"));
        assert_eq!(
            check("0 2 * * MON-FRI", friday, at("2026-11-23T12:00:00Z")),
            fresh_until("2026-11-24T14:00:00Z")
        );
    }

    #[test]
    fn the_clock_starts_at_the_newer_of_scheduling_and_the_last_success() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
        let mut status = PostgreSQLStatus::default();
        status.conditions.push(Condition {
            type_: BACKUP_SCHEDULED.into(),
            status: "True".into(),
            reason: "Scheduled".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at("2026-11-10T00:00:00Z")),
        });
        let success = SuccessfulBackup {
            name: "b".into(),
            completed_at: Time(at("2026-11-20T02:10:00Z")),
        };
        assert_eq!(since(Some(&status), None), Some(at("2026-11-10T00:00:00Z")));
        assert_eq!(
            since(Some(&status), Some(&success)),
            Some(at("2026-11-20T02:10:00Z"))
        );
        status.conditions[0].status = "False".into();
        assert_eq!(since(Some(&status), None), None);
    }

    #[test]
    fn nothing_to_judge_without_a_reference_or_a_valid_schedule() {
        let now = at("2026-11-22T14:00:00Z");
        assert_eq!(check("0 2 * * *", None, now), Freshness::Unknown);
        assert_eq!(
            check("0 0 L * *", Some(at("2020-01-01T00:00:00Z")), now),
            Freshness::Unknown
        );
    }
}
