//! Unit tests of the verification schedule and the cluster's verification status.

use super::*;
use crate::crd::{BackupStatus, VERIFY_ANNOTATION};
use crate::runtime::conditions::Update;

fn ts(text: &str) -> Timestamp {
    text.parse().expect("a valid time")
}

fn policy(window: Option<&str>) -> VerifyPolicy {
    VerifyPolicy {
        schedule: "0 4 * * 0".into(),
        window: window.map(Into::into),
        job_deadline_seconds: None,
    }
}

/// Backup `name` completed at `completed`, with a verification (request, phase, started,
/// finished) and an optional `tusk.dev/verify` annotation.
fn backup(
    name: &str,
    completed: &str,
    verified: Option<(&str, VerificationPhase, &str, &str)>,
    annotation: Option<&str>,
) -> Backup {
    let mut b = Backup::of_cluster(name, "prod", "demo");
    b.metadata.annotations =
        annotation.map(|a| [(VERIFY_ANNOTATION.to_owned(), a.to_owned())].into());
    b.status = Some(BackupStatus {
        completed_at: Some(Time(ts(completed))),
        verification: verified.map(|(request, phase, started, finished)| Verification {
            phase: Some(phase),
            request: Some(request.into()),
            started_at: Some(Time(ts(started))),
            completed_at: Some(Time(ts(finished))),
            failed_check: (phase == VerificationPhase::Failed).then(|| "checksums".into()),
            message: Some("done".into()),
            ..Verification::default()
        }),
        ..BackupStatus::default()
    });
    b
}

#[test]
fn the_first_verification_is_due_at_once_then_on_the_schedule() {
    let never = [backup("b1", "2026-11-22T02:00:00Z", None, None)];
    let now = ts("2026-11-23T10:00:00Z");
    assert_eq!(
        due("0 4 * * 0", &never, Some("b1"), now),
        Due::Now {
            backup: "b1".into(),
            request: "scheduled-2026-11-23T10:00:00Z".into()
        }
    );
    // Verified on Monday 23rd: next Sunday 04:00 is the 29th.
    let verified = [
        backup(
            "b1",
            "2026-11-22T02:00:00Z",
            Some((
                "r",
                VerificationPhase::Passed,
                "2026-11-23T10:00:00Z",
                "2026-11-23T10:05:00Z",
            )),
            Some("r"),
        ),
        backup("b2", "2026-11-24T02:00:00Z", None, None),
    ];
    assert_eq!(
        due(
            "0 4 * * 0",
            &verified,
            Some("b2"),
            ts("2026-11-28T00:00:00Z")
        ),
        Due::No {
            next: Some(ts("2026-11-29T04:00:00Z"))
        }
    );
    assert_eq!(
        due(
            "0 4 * * 0",
            &verified,
            Some("b2"),
            ts("2026-11-29T04:00:30Z")
        ),
        Due::Now {
            backup: "b2".into(),
            request: "scheduled-2026-11-29T04:00:00Z".into()
        }
    );
}

#[test]
fn nothing_is_due_without_a_completed_backup_or_while_a_request_is_unanswered() {
    let now = ts("2026-11-23T10:00:00Z");
    assert_eq!(due("@weekly", &[], None, now), Due::No { next: None });
    let asked = [backup("b1", "2026-11-22T02:00:00Z", None, Some("mine"))];
    assert_eq!(
        due("@weekly", &asked, Some("b1"), now),
        Due::No { next: None }
    );
}

fn verdict<'a>(update: &Update<'a>) -> (bool, &'a str) {
    (update.status, update.reason)
}

#[test]
fn backup_verified_follows_the_latest_verification_and_the_window() {
    let passed = backup(
        "b1",
        "2026-11-22T02:00:00Z",
        Some((
            "r1",
            VerificationPhase::Passed,
            "2026-11-22T04:00:00Z",
            "2026-11-22T04:01:00Z",
        )),
        None,
    );
    let failed = backup(
        "b2",
        "2026-11-23T02:00:00Z",
        Some((
            "r2",
            VerificationPhase::Failed,
            "2026-11-23T04:00:00Z",
            "2026-11-23T04:01:00Z",
        )),
        None,
    );
    let now = ts("2026-11-24T00:00:00Z");
    let one = [passed.clone()];
    assert_eq!(
        verdict(&condition(&policy(Some("8d")), &one, now)),
        (true, "Verified")
    );
    let both = [passed.clone(), failed];
    assert_eq!(
        verdict(&condition(&policy(None), &both, now)),
        (false, "ChecksumMismatch")
    );
    let late = ts("2026-12-01T00:00:00Z");
    assert_eq!(
        verdict(&condition(&policy(Some("8d")), &one, late)),
        (false, "VerificationOverdue")
    );
    assert_eq!(
        verdict(&condition(&policy(Some("8d")), &[], now)),
        (false, "NotVerifiedYet")
    );
    let last = last_verified(&both).expect("b1 passed");
    assert_eq!(
        (last.name.as_str(), last.verified_at.0),
        ("b1", ts("2026-11-22T04:01:00Z"))
    );
    assert_eq!(
        window_ends(&policy(Some("8d")), Some(&last)).map(|t| t.0),
        Some(ts("2026-11-30T04:01:00Z"))
    );
}
