//! Unit tests of the verification decisions and of reading the agent's report.

use super::*;
use crate::crd::BackupMethod;
use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};

use crate::resources::fixtures::finished_job_status;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a valid time"))
}

fn backup(annotation: Option<&str>, recorded: Option<(&str, VerificationPhase)>) -> Backup {
    let mut b = Backup::of_cluster("nightly", "prod", "demo");
    b.metadata.uid = Some("backup-uid".into());
    b.metadata.annotations =
        annotation.map(|a| [(VERIFY_ANNOTATION.to_owned(), a.to_owned())].into());
    b.status = Some(BackupStatus {
        verification: recorded.map(|(request, phase)| Verification {
            phase: Some(phase),
            request: Some(request.into()),
            ..Verification::default()
        }),
        ..BackupStatus::default()
    });
    b
}

fn job(request: &str, owner_uid: &str, condition: Option<(&str, &str)>) -> Job {
    let mut job = Job::default();
    job.metadata.name = Some("nightly-verify".into());
    job.metadata.annotations = Some([(VERIFY_ANNOTATION.to_owned(), request.to_owned())].into());
    job.metadata.owner_references = Some(vec![OwnerReference {
        kind: "Backup".into(),
        name: "nightly".into(),
        uid: owner_uid.into(),
        ..OwnerReference::default()
    }]);
    job.spec = Some(JobSpec {
        active_deadline_seconds: Some(3600),
        ..JobSpec::default()
    });
    job.status = Some(
        condition.map_or_else(JobStatus::default, |(type_, reason)| {
            finished_job_status(type_, Some(reason), None)
        }),
    );
    job
}

#[test]
fn nothing_happens_without_a_request() {
    assert_eq!(next(&backup(None, None), None), Next::Idle);
    let done = backup(Some("r1"), Some(("r1", VerificationPhase::Passed)));
    assert_eq!(next(&done, None), Next::Idle);
    assert_eq!(next(&backup(Some(""), None), None), Next::Idle);
}

#[test]
fn a_physical_backup_starts_the_same_job_which_recovers_it_from_the_archive() {
    let mut b = backup(Some("now"), None);
    b.spec.method = BackupMethod::Physical;
    assert!(
        matches!(next(&b, None), Next::Start { .. }),
        "{:?}",
        next(&b, None)
    );
    let mut b = backup(Some("now"), Some(("now", VerificationPhase::Passed)));
    b.spec.method = BackupMethod::Physical;
    assert_eq!(next(&b, None), Next::Idle);
}

#[test]
fn a_new_request_starts_a_job_or_replaces_an_earlier_one() {
    let asked = backup(Some("r2"), Some(("r1", VerificationPhase::Passed)));
    assert_eq!(
        next(&asked, None),
        Next::Start {
            request: "r2".into()
        }
    );
    let old_job = job("r1", "backup-uid", Some(("Complete", "")));
    assert_eq!(next(&asked, Some(&old_job)), Next::ReplaceJob);
    // Created but not recorded yet (a concurrent reconcile): follow it.
    assert_eq!(
        next(&asked, Some(&job("r2", "backup-uid", None))),
        Next::Running
    );
    let foreign = job("r2", "other-uid", None);
    assert_eq!(
        next(&asked, Some(&foreign)),
        Next::Conflict {
            job: "nightly-verify".into()
        }
    );
    // Once the conflict is recorded for the request, it is not reported again.
    let reported = backup(Some("r2"), Some(("r2", VerificationPhase::Error)));
    assert_eq!(next(&reported, Some(&foreign)), Next::Idle);
}

#[test]
fn a_recorded_run_is_followed_to_its_end() {
    let running = backup(Some("r1"), Some(("r1", VerificationPhase::Running)));
    assert_eq!(
        next(&running, Some(&job("r1", "backup-uid", None))),
        Next::Running
    );
    let done = job("r1", "backup-uid", Some(("Complete", "")));
    assert_eq!(next(&running, Some(&done)), Next::Finished);
    let failed = job("r1", "backup-uid", Some(("Failed", "BackoffLimitExceeded")));
    assert_eq!(next(&running, Some(&failed)), Next::Finished);
    assert_eq!(next(&running, None), Next::JobGone);
}

const FAILED_REPORT: &str = r#"{"backupId":"nightly","phase":"Failed","failedCheck":"counts",
 "checks":[{"name":"checksums","result":"passed","message":"5 files"},
           {"name":"counts","result":"failed","message":"app.public.orders: 20000 rows restored, 19999 recorded"}],
 "databases":4,"tables":5,"rows":22867,"startedAt":"2026-11-23T02:00:00Z","completedAt":"2026-11-23T02:00:04Z",
 "durationSeconds":3.5,"message":"counts: app.public.orders: 20000 rows restored, 19999 recorded"}"#;

#[test]
fn a_failed_report_names_the_failed_check() {
    let failed = job("r1", "backup-uid", Some(("Failed", "BackoffLimitExceeded")));
    let old = started("r1", "nightly-verify", &at(100));
    let v = finished(Some(&old), &failed, Some(FAILED_REPORT), &at(200));
    assert_eq!(v.phase, Some(VerificationPhase::Failed));
    assert_eq!(v.failed_check.as_deref(), Some("counts"));
    assert_eq!(
        (v.databases, v.tables, v.rows),
        (Some(4), Some(5), Some(22867))
    );
    assert_eq!(v.duration_seconds, Some(3.5));
    assert_eq!(v.request.as_deref(), Some("r1"));
    assert_eq!(v.checks.len(), 2);
    let status = with_verification(None, v, &at(200));
    let condition = &status.conditions[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status.as_str(),
            condition.reason.as_str()
        ),
        ("Verified", "False", "CountsDiffer")
    );
    assert!(condition.message.starts_with("counts: app.public.orders"));
}

#[test]
fn a_passed_report_makes_the_backup_verified() {
    let report = FAILED_REPORT
        .replace("\"Failed\"", "\"Passed\"")
        .replace("\"failedCheck\":\"counts\",", "");
    let done = job("r1", "backup-uid", Some(("Complete", "")));
    let v = finished(None, &done, Some(&report), &at(200));
    assert_eq!(v.phase, Some(VerificationPhase::Passed));
    assert_eq!(
        v.started_at,
        Some(Time("2026-11-23T02:00:00Z".parse().expect("time")))
    );
    let status = with_verification(None, v, &at(200));
    assert!(conditions::is_true(&status.conditions, VERIFIED));
}

#[test]
fn a_job_without_a_report_is_an_error_naming_why() {
    let mut stopped = job("r1", "backup-uid", Some(("Failed", "DeadlineExceeded")));
    stopped.metadata.name = Some("nightly-verify".into());
    let v = finished(None, &stopped, None, &at(200));
    assert_eq!(v.phase, Some(VerificationPhase::Error));
    assert_eq!(
        v.message.as_deref(),
        Some(
            "verification Job nightly-verify ran longer than its deadline (3600s) and was \
             stopped (spec.backup.verify.jobDeadlineSeconds)"
        )
    );
    let crashed = job("r1", "backup-uid", Some(("Failed", "BackoffLimitExceeded")));
    let v = finished(None, &crashed, Some("thread panicked\n"), &at(200));
    assert_eq!(
        v.message.as_deref(),
        Some("verification Job nightly-verify left no report: thread panicked")
    );
    let status = with_verification(None, v, &at(200));
    assert_eq!(status.conditions[0].reason, "VerificationError");
}

#[test]
fn a_running_reverification_keeps_the_previous_verdict() {
    let done = job("r1", "backup-uid", Some(("Complete", "")));
    let report = FAILED_REPORT.replace("\"Failed\"", "\"Passed\"");
    let passed = with_verification(
        None,
        finished(None, &done, Some(&report), &at(200)),
        &at(200),
    );
    let again = with_verification(
        Some(&passed),
        started("r2", "nightly-verify", &at(300)),
        &at(300),
    );
    assert!(conditions::is_true(&again.conditions, VERIFIED));
    assert_eq!(
        again.verification.and_then(|v| v.phase),
        Some(VerificationPhase::Running)
    );
}

#[test]
fn every_check_has_its_reason() {
    let reasons: Vec<&str> = [
        "checksums",
        "restore",
        "databases",
        "amcheck",
        "counts",
        "new",
    ]
    .iter()
    .map(|c| failed_check_reason(Some(c)))
    .collect();
    assert_eq!(
        reasons,
        [
            "ChecksumMismatch",
            "RestoreFailed",
            "DatabaseMissing",
            "AmcheckFailed",
            "CountsDiffer",
            "VerificationFailed"
        ]
    );
}
