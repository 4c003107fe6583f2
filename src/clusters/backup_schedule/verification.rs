//! A cluster's verifications, decided on plain values: whether the schedule of
//! `spec.backup.verify` is due (the cluster controller then asks the newest Completed Backup with
//! `tusk.dev/verify`; the Backup controller runs the Job), `lastVerifiedBackup` and the
//! `BackupVerified` condition.

use backup_store::duration::parse_duration;
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use super::freshness::parse;
use crate::crd::conditions::BACKUP_VERIFIED;
pub use crate::crd::last_verified;
use crate::crd::{
    Backup, SCHEDULED_VERIFY_PREFIX, Verification, VerificationPhase, VerifiedBackup, VerifyPolicy,
    failed_check_reason, verify_request,
};
use crate::runtime::conditions::Update;

/// Whether a scheduled verification should start now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due {
    /// Not now; look again at `next` (when known).
    No { next: Option<Timestamp> },
    /// Ask Backup `backup` for a verification with request value `request`.
    Now { backup: String, request: String },
}

fn verification(backup: &Backup) -> Option<&Verification> {
    backup.status.as_ref()?.verification.as_ref()
}

/// Judges `schedule` at `now` for the Backups of one cluster, `newest` being its newest
/// Completed one. Due once a scheduled time passed since the most recent verification started
/// (at once when none ever did); never while a request is still unanswered.
pub fn due<'a>(
    schedule: &str,
    backups: impl IntoIterator<Item = &'a Backup> + Clone,
    newest: Option<&str>,
    now: Timestamp,
) -> Due {
    let unanswered = backups.clone().into_iter().any(|b| {
        verify_request(b)
            .is_some_and(|r| Some(r) != verification(b).and_then(|v| v.request.as_deref()))
    });
    let (Some(newest), false) = (newest, unanswered) else {
        return Due::No { next: None };
    };
    let last_started = backups
        .into_iter()
        .filter_map(|b| verification(b)?.started_at.as_ref().map(|t| t.0))
        .max();
    let Some(last_started) = last_started else {
        return Due::Now {
            backup: newest.to_owned(),
            request: format!("{SCHEDULED_VERIFY_PREFIX}{now}"),
        };
    };
    let next = parse(schedule)
        .zip(DateTime::<Utc>::from_timestamp(last_started.as_second(), 0))
        .and_then(|(cron, after)| cron.iter_after(after).next())
        .and_then(|t| Timestamp::from_second(t.timestamp()).ok());
    match next {
        Some(next) if next <= now => Due::Now {
            backup: newest.to_owned(),
            request: format!("{SCHEDULED_VERIFY_PREFIX}{next}"),
        },
        next => Due::No { next },
    }
}

/// The `BackupVerified` condition of a cluster with `policy`: False when the most recent
/// verification to finish failed or could not run, or when none passed within the window.
pub fn condition<'a>(
    policy: &VerifyPolicy,
    backups: impl IntoIterator<Item = &'a Backup> + Clone,
    now: Timestamp,
) -> Update<'static> {
    let latest = backups
        .clone()
        .into_iter()
        .filter_map(|b| {
            let v = verification(b)?;
            let finished = v.completed_at.as_ref()?.0;
            (v.phase != Some(VerificationPhase::Running)).then_some((finished, b.name_any(), v))
        })
        .max_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let update = |status, reason, message| Update {
        type_: BACKUP_VERIFIED,
        status,
        reason,
        message,
    };
    let Some((_, name, v)) = latest else {
        return update(
            false,
            "NotVerifiedYet",
            "no verification has finished yet".to_owned(),
        );
    };
    let message = v.message.clone().unwrap_or_default();
    match v.phase {
        Some(VerificationPhase::Failed) => {
            let reason = failed_check_reason(v.failed_check.as_deref());
            return update(false, reason, format!("backup {name}: {message}"));
        }
        Some(VerificationPhase::Error) | None => {
            return update(
                false,
                "VerificationError",
                format!("backup {name}: {message}"),
            );
        }
        Some(VerificationPhase::Passed | VerificationPhase::Running) => {}
    }
    let Some(verified) = last_verified(backups) else {
        return update(
            false,
            "NotVerifiedYet",
            "no verification has passed".to_owned(),
        );
    };
    let window = policy
        .window
        .as_deref()
        .and_then(|w| parse_duration(w).ok());
    let expired = window
        .and_then(|w| SignedDuration::try_from(w).ok())
        .and_then(|w| verified.verified_at.0.checked_add(w).ok())
        .is_some_and(|until| until < now);
    if expired {
        let window = policy.window.clone().unwrap_or_default();
        let message = format!(
            "no verification passed within {window}: the last one, of backup {}, passed at {}",
            verified.name, verified.verified_at.0
        );
        return update(false, "VerificationOverdue", message);
    }
    update(true, "Verified", format!("backup {name}: {message}"))
}

/// When [`condition`] turns False for want of a passing verification, if it is True now.
pub fn window_ends(policy: &VerifyPolicy, last: Option<&VerifiedBackup>) -> Option<Time> {
    let window = parse_duration(policy.window.as_deref()?).ok()?;
    let window = SignedDuration::try_from(window).ok()?;
    Some(Time(last?.verified_at.0.checked_add(window).ok()?))
}

#[cfg(test)]
#[path = "verification_tests.rs"]
mod tests;
