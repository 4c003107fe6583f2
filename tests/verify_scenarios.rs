//! Mock-API scenarios for verifications of Completed Backups (`tusk.dev/verify`): each step
//! with its exact API calls.

mod support;

use std::sync::Arc;

use kube::runtime::controller::Action;
use serde_json::{Value, json};
use support::memory_store::MemoryBucket;
use support::paths::{JOBS, NIGHTLY_STATUS};
use support::run::against;
use support::scripts::nightly_job_started;
use support::verifier::{Expect, Seen};
use support::world::*;
use tusk::Backup;
use tusk::clusters::status::BackupSchedule;

async fn reconcile_backup(
    backup: Backup,
    jobs: Vec<k8s_openapi::api::batch::v1::Job>,
    script: Vec<Expect>,
) -> (Result<Action, tusk::error::Error>, Vec<Seen>) {
    let (pg, mut cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    cache.jobs = jobs;
    against(&pg, cache, MemoryBucket::default(), script, |ctx| {
        tusk::backups::reconcile(Arc::new(backup), ctx)
    })
    .await
}

/// The Completed Backup `nightly` with `tusk.dev/verify: <request>` and, when given, the
/// verification recorded so far.
fn asked(request: &str, recorded: Option<Value>) -> Backup {
    let mut b = completed_backup("nightly", "2026-11-22T02:01:00Z");
    b.metadata.annotations = Some([("tusk.dev/verify".to_owned(), request.to_owned())].into());
    if let (Some(status), Some(recorded)) = (b.status.as_mut(), recorded) {
        status.verification = Some(serde_json::from_value(recorded).expect("a verification"));
    }
    b
}

fn running(request: &str) -> Value {
    json!({"phase": "Running", "request": request, "job": "nightly-verify",
           "startedAt": "2026-11-23T02:00:00Z"})
}

/// The verification Job of `nightly` for `request`, in `condition`.
fn verify_job(request: &str, condition: Option<&str>) -> k8s_openapi::api::batch::v1::Job {
    let labels = json!({"app.kubernetes.io/component": "verify", "tusk.dev/cluster": "demo"});
    let mut job = job(
        "nightly-verify",
        ("Backup", "nightly", "uid-nightly"),
        condition,
        labels,
    );
    job.metadata.annotations = Some([("tusk.dev/verify".to_owned(), request.to_owned())].into());
    job
}

/// `status` and `reason` of condition `type_` in a status request's body.
fn verdict(body: &Value, type_: &str) -> (Value, Value) {
    let condition = support::read::condition(body, type_);
    (condition["status"].clone(), condition["reason"].clone())
}

fn report(phase: &str, failed_check: Option<&str>, message: &str) -> String {
    let mut report = json!({"backupId": "nightly", "phase": phase,
        "checks": [{"name": "checksums", "result": "passed", "message": "2 files"},
                   {"name": "counts", "result": if failed_check.is_some() { "failed" } else { "passed" },
                    "message": message}],
        "databases": 1, "tables": 4, "rows": 1234,
        "startedAt": "2026-11-23T02:00:00Z", "completedAt": "2026-11-23T02:00:09Z",
        "durationSeconds": 9.5, "message": message});
    if let Some(check) = failed_check {
        report["failedCheck"] = json!(check);
    }
    report.to_string()
}

#[tokio::test]
async fn a_request_on_a_completed_backup_starts_a_verification_job_it_owns() {
    let script = nightly_job_started();
    let (result, seen) = reconcile_backup(asked("2026-11-23", None), vec![], script).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    let job = &seen[0].body;
    assert_eq!(job["metadata"]["name"], "nightly-verify");
    assert_eq!(
        job["metadata"]["annotations"]["tusk.dev/verify"],
        "2026-11-23"
    );
    let owner = &job["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str()),
        (Some("Backup"), Some("uid-nightly"))
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"],
        "docker.io/library/postgres:18"
    );
    assert_eq!(
        pod["containers"][0]["args"],
        json!(["verify-restore", "--backup-id", "nightly"])
    );
    assert_eq!(pod["initContainers"][0]["image"], AGENT_IMAGE);
    assert_eq!(job["spec"]["backoffLimit"], 0);
    let verification = &seen[1].body["status"]["verification"];
    assert_eq!(verification["phase"], "Running");
    assert_eq!(verification["request"], "2026-11-23");
    assert_eq!(verification["job"], "nightly-verify");
    // Running leaves no verdict yet: no Verified condition.
    let conditions = seen[1].body["status"]["conditions"].as_array();
    assert!(
        conditions
            .into_iter()
            .flatten()
            .all(|c| c["type"] != "Verified")
    );
    assert_eq!(seen[2].body["reason"], "VerificationStarted");
}

#[tokio::test]
async fn a_physical_backup_is_verified_by_the_same_job_which_recovers_it() {
    let mut backup = asked("2026-11-23", None);
    backup.spec.method = tusk::crd::BackupMethod::Physical;
    let (result, seen) = reconcile_backup(backup, vec![], nightly_job_started()).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    let pod = &seen[0].body["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["args"],
        json!(["verify-restore", "--backup-id", "nightly"])
    );
    assert_eq!(seen[1].body["status"]["verification"]["phase"], "Running");
}

#[tokio::test]
async fn a_passed_report_makes_the_backup_verified_with_its_counts() {
    let message = "restored 1 databases, 4 tables, 1234 rows; every check passed";
    let script = vec![
        Expect::job_pods(NS, 0, &report("Passed", None, message)),
        Expect::apply_backup_status(NIGHTLY_STATUS),
        Expect::event(NS),
    ];
    let backup = asked("r1", Some(running("r1")));
    let jobs = vec![verify_job("r1", Some("Complete"))];
    let (result, seen) = reconcile_backup(backup, jobs, script).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    assert!(
        seen[0]
            .query
            .contains("batch.kubernetes.io%2Fjob-name%3Dnightly-verify"),
        "{}",
        seen[0].query
    );
    let status = &seen[1].body["status"];
    let verification = &status["verification"];
    assert_eq!(verification["phase"], "Passed");
    assert_eq!(
        (&verification["tables"], &verification["rows"]),
        (&json!(4), &json!(1234))
    );
    assert_eq!(verification["durationSeconds"], 9.5);
    assert_eq!(verification["completedAt"], "2026-11-23T02:00:09Z");
    assert_eq!(verification["checks"][1]["name"], "counts");
    assert_eq!(
        verdict(&seen[1].body, "Verified"),
        (json!("True"), json!("Verified"))
    );
    assert_eq!(seen[2].body["reason"], "Verified");
    assert_eq!(seen[2].body["type"], "Normal");
}

#[tokio::test]
async fn a_failed_report_naming_counts_makes_verified_false_with_counts_differ() {
    let message = "counts: app.public.orders: 20000 rows restored, 19999 recorded";
    let script = vec![
        Expect::job_pods(NS, 7, &report("Failed", Some("counts"), message)),
        Expect::apply_backup_status(NIGHTLY_STATUS),
        Expect::event(NS),
    ];
    let backup = asked("r1", Some(running("r1")));
    let jobs = vec![verify_job("r1", Some("Failed"))];
    let (_, seen) = reconcile_backup(backup, jobs, script).await;
    let status = &seen[1].body["status"];
    assert_eq!(status["verification"]["phase"], "Failed");
    assert_eq!(status["verification"]["failedCheck"], "counts");
    assert_eq!(
        verdict(&seen[1].body, "Verified"),
        (json!("False"), json!("CountsDiffer"))
    );
    assert_eq!(
        support::read::condition(&seen[1].body, "Verified")["message"],
        message
    );
    assert_eq!(seen[2].body["reason"], "CountsDiffer");
    assert_eq!(seen[2].body["type"], "Warning");
}

#[tokio::test]
async fn a_running_or_answered_verification_makes_no_calls() {
    let running_job = vec![verify_job("r1", None)];
    let (result, seen) =
        reconcile_backup(asked("r1", Some(running("r1"))), running_job, vec![]).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    assert!(seen.is_empty());
    let answered = json!({"phase": "Passed", "request": "r1"});
    let (_, seen) = reconcile_backup(asked("r1", Some(answered)), vec![], vec![]).await;
    assert!(seen.is_empty());
}

#[tokio::test]
async fn a_new_request_replaces_the_job_of_the_previous_one() {
    let answered = json!({"phase": "Passed", "request": "r1"});
    let jobs = vec![verify_job("r1", Some("Complete"))];
    let script = vec![Expect::delete(format!("{JOBS}/nightly-verify"))];
    let (result, _) = reconcile_backup(asked("r2", Some(answered)), jobs, script).await;
    assert_eq!(
        result.expect("reconciled"),
        Action::requeue(std::time::Duration::from_secs(2))
    );
}

/// `demo` with weekly verifications and an 8-day window, converged, with `backups` cached.
fn verifying_cluster(backups: Vec<Backup>) -> (tusk::crd::PostgreSQL, support::world::Cache) {
    let spec = format!("{WITH_BACKUP}  verify: {{schedule: \"@weekly\", window: 8d}}\n");
    let (pg, mut cache) = converged(&spec, true, BackupSchedule::Scheduled);
    cache.backups = backups;
    (pg, cache)
}

#[tokio::test]
async fn the_schedule_asks_the_newest_completed_backup_for_its_first_verification() {
    let older = completed_backup("older", "2026-11-21T02:01:00Z");
    let newest = completed_backup("nightly", "2026-11-22T02:01:00Z");
    let answer = serde_json::to_value(&newest).expect("a Backup as JSON");
    let (pg, cache) = verifying_cluster(vec![older, newest]);
    let script = vec![
        Expect::new(
            http::Method::PATCH,
            format!("{}/nightly", support::paths::BACKUPS),
            move |_| (http::StatusCode::OK, answer),
        ),
        Expect::event(NS),
        Expect::apply_status(support::paths::STATUS),
    ];
    let (_, seen) = support::run::scenario(pg, cache, script).await;
    let request = seen[0].body["metadata"]["annotations"]["tusk.dev/verify"]
        .as_str()
        .unwrap_or_default();
    assert!(request.starts_with("scheduled-"), "{:#}", seen[0].body);
    assert_eq!(seen[1].body["reason"], "VerificationScheduled");
    assert_eq!(
        verdict(&seen[2].body, "BackupVerified"),
        (json!("False"), json!("NotVerifiedYet"))
    );
}

#[tokio::test]
async fn a_passed_verification_is_the_clusters_last_verified_backup() {
    let mut verified = asked(
        "r1",
        Some(json!({"phase": "Passed", "request": "r1",
        "startedAt": "2099-01-01T00:00:00Z", "completedAt": "2099-01-01T00:05:00Z",
        "message": "every check passed"})),
    );
    verified.metadata.name = Some("nightly".into());
    let (pg, cache) = verifying_cluster(vec![verified]);
    // Started "in the future": the schedule is not due, so only the status is written.
    let script = vec![Expect::apply_status(support::paths::STATUS)];
    let (_, seen) = support::run::scenario(pg, cache, script).await;
    let status = &seen[0].body["status"];
    assert_eq!(status["lastVerifiedBackup"]["name"], "nightly");
    assert_eq!(
        status["lastVerifiedBackup"]["verifiedAt"],
        "2099-01-01T00:05:00Z"
    );
    assert_eq!(
        verdict(&seen[0].body, "BackupVerified"),
        (json!("True"), json!("Verified"))
    );
}

#[tokio::test]
async fn retention_keeps_the_newest_verified_backup() {
    const PREFIX: &str = "prod/demo/";
    let bucket = MemoryBucket::default();
    for (id, completed) in [
        ("old", "2026-11-21T02:01:00Z"),
        ("nightly", "2026-11-22T02:01:00Z"),
    ] {
        bucket.put(
            &format!("{PREFIX}{id}/manifest.json"),
            manifest_json(id, completed),
        );
        bucket.put(&format!("{PREFIX}{id}/app.dump.zst"), "dump");
    }
    let mut old = completed_backup("old", "2026-11-21T02:01:00Z");
    if let Some(status) = old.status.as_mut() {
        status.verification = Some(
            serde_json::from_value(json!({"phase": "Passed", "request": "r1",
                "completedAt": "2026-11-21T04:00:00Z"}))
            .expect("a verification"),
        );
    }
    let mut running = support::world::backup("nightly", false);
    running.status = serde_json::from_value(json!({"phase": "Running", "job": "nightly",
        "destination": {"s3": {"bucket": "backups"}}}))
    .expect("status");
    let spec = format!("{WITH_BACKUP}  retention: {{keep: 1}}\n");
    let (pg, mut cache) = converged(&spec, true, BackupSchedule::Scheduled);
    cache.jobs = vec![job(
        "nightly",
        ("Backup", "nightly", "uid-nightly"),
        Some("Complete"),
        json!({}),
    )];
    cache.backups = vec![old, running.clone()];
    // Completed, then retention with keep: 1 finds nothing it may delete: no delete, no Event.
    let script = vec![
        Expect::apply_backup_status(NIGHTLY_STATUS),
        Expect::event(NS),
    ];
    let (result, seen) = against(&pg, cache, bucket.clone(), script, |ctx| {
        tusk::backups::reconcile(Arc::new(running), ctx)
    })
    .await;
    result.expect("reconciled");
    assert_eq!(seen[0].body["status"]["phase"], "Completed");
    assert_eq!(bucket.keys().len(), 4, "the verified older backup is kept");
}
