//! Mock-API scenarios for the Backup controller: each transition with its exact API calls.

mod support;

use std::time::Duration;

use http::Method;
use kube::runtime::controller::Action;
use serde_json::json;
use support::backup_run::*;
use support::memory_store::MemoryBucket;
use support::paths::{BACKUPS, NIGHTLY_STATUS};
use support::scripts::nightly_job_started;
use support::verifier::Expect;
use support::world::*;

#[tokio::test]
async fn an_on_demand_backup_starts_a_job_it_owns() {
    let script = nightly_job_started();
    let (result, seen) = reconcile_backup(
        backup("nightly", false),
        Cache::default(),
        empty_bucket(),
        script,
    )
    .await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    let job = &seen[0].body;
    assert_eq!(job["metadata"]["name"], "nightly");
    let owner = &job["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str()),
        (Some("Backup"), Some("uid-nightly"))
    );
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["args"], json!(["backup"]));
    let env = container["env"].as_array().expect("env");
    let backup_id = env
        .iter()
        .find(|e| e["name"] == "TUSK_BACKUP_ID")
        .expect("backup id");
    assert_eq!(
        backup_id["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.labels['batch.kubernetes.io/job-name']"
    );
    let status = status_of(&seen[1]);
    assert_eq!(status["phase"], "Running");
    assert_eq!(status["job"], "nightly");
    assert_eq!(status["destination"]["s3"]["bucket"], "backups");
    assert_eq!(seen[2].body["reason"], "Started");
}

#[tokio::test]
async fn a_backup_waits_while_its_cluster_is_not_ready() {
    let mut b = backup("nightly", false);
    b.spec.cluster.name = "missing".into();
    let script = vec![Expect::apply_backup_status(NIGHTLY_STATUS)];
    let (result, seen) = reconcile_backup(b, Cache::default(), empty_bucket(), script).await;
    assert_eq!(
        result.expect("reconciled"),
        Action::requeue(Duration::from_secs(10))
    );
    let status = status_of(&seen[0]);
    assert_eq!(status["phase"], "Pending");
    assert_eq!(status["conditions"][0]["reason"], "ClusterNotFound");
}

#[tokio::test]
async fn completed_only_from_the_manifest_then_retention_deletes_objects_then_backups() {
    let bucket = MemoryBucket::default();
    bucket.put(
        &format!("{PREFIX}old/manifest.json"),
        manifest_json("old", "2026-11-21T02:01:00Z"),
    );
    bucket.put(&format!("{PREFIX}old/app.dump.zst"), "old dump");
    bucket.put(&format!("{PREFIX}nightly/app.dump.zst"), "new dump");
    bucket.put(
        &format!("{PREFIX}nightly/manifest.json"),
        manifest_json("nightly", "2026-11-22T02:01:00Z"),
    );
    bucket.put(
        "prod/demo2/old/manifest.json",
        manifest_json("old", "2026-11-20T02:01:00Z"),
    );
    let mut running = backup("nightly", false);
    running.status = serde_json::from_value(json!({"phase": "Running", "job": "nightly",
        "destination": {"s3": {"bucket": "backups"}}}))
    .expect("status");
    let cache = Cache {
        jobs: vec![own_job(Some("Complete"))],
        backups: vec![
            completed_backup("old", "2026-11-21T02:01:00Z"),
            running.clone(),
        ],
        ..Cache::default()
    };
    let script = vec![
        Expect::apply_backup_status(NIGHTLY_STATUS),
        Expect::event(NS),
        // keep: 1 — the older backup goes, objects first, then its Backup.
        Expect::delete(format!("{BACKUPS}/old")),
        Expect::event(NS),
    ];
    let (result, seen) = reconcile_backup(running, cache, bucket.clone(), script).await;
    result.expect("reconciled");
    let status = status_of(&seen[0]);
    assert_eq!(status["phase"], "Completed");
    assert_eq!(status["sizeBytes"], 1000);
    assert_eq!(status["postgresVersion"], "18.1");
    assert_eq!(status["location"], "s3://backups/prod/demo/nightly/");
    assert_eq!(status["sha256"].as_str().map(str::len), Some(64));
    assert_eq!(status["conditions"][0]["type"], "Completed");
    assert_eq!(status["conditions"][0]["status"], "True");
    assert_eq!(seen[1].body["reason"], "Completed");
    assert_eq!(seen[3].body["reason"], "RetentionApplied");
    assert_eq!(
        bucket.keys(),
        [
            "prod/demo/nightly/app.dump.zst",
            "prod/demo/nightly/manifest.json",
            "prod/demo2/old/manifest.json",
        ],
        "only demo's older backup is deleted"
    );
}

#[tokio::test]
async fn a_job_that_wrote_no_manifest_fails_the_backup() {
    let bucket = MemoryBucket::default();
    bucket.put(&format!("{PREFIX}nightly/app.dump.zst"), "partial");
    let cache = succeeded_job();
    let script = final_status_and_event();
    let (result, seen) = reconcile_backup(backup("nightly", false), cache, bucket, script).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    let status = status_of(&seen[0]);
    assert_eq!(status["phase"], "Failed");
    assert_eq!(status["conditions"][0]["reason"], "ManifestMissing");
    assert!(
        status["error"]
            .as_str()
            .unwrap_or_default()
            .contains("no manifest.json")
    );
    assert_eq!(
        (
            seen[1].body["type"].as_str(),
            seen[1].body["reason"].as_str()
        ),
        (Some("Warning"), Some("ManifestMissing"))
    );
}

#[tokio::test]
async fn a_failed_job_fails_the_backup_with_its_reason() {
    let cache = Cache {
        jobs: vec![own_job(Some("Failed"))],
        ..Cache::default()
    };
    let reason = "database: cannot connect to postgres@demo-rw.prod.svc:5432 database \"postgres\"";
    let mut script = vec![Expect::job_pods(NS, 3, reason)];
    script.extend(final_status_and_event());
    let (_, seen) = reconcile_backup(backup("nightly", false), cache, empty_bucket(), script).await;
    assert!(
        seen[0]
            .query
            .contains("batch.kubernetes.io%2Fjob-name%3Dnightly"),
        "{}",
        seen[0].query
    );
    let status = status_of(&seen[1]);
    assert_eq!(status["phase"], "Failed");
    let expected = format!("backup Job nightly failed: {reason} (exit code 3)");
    assert_eq!(status["error"], expected.as_str());
    assert_eq!(seen[2].body["reason"], "JobFailed");
    assert_eq!(seen[2].body["note"], expected.as_str());
}

#[tokio::test]
async fn a_job_stopped_at_its_deadline_fails_the_backup_naming_it() {
    let mut stuck = own_job(Some("Failed"));
    stuck.spec.get_or_insert_default().active_deadline_seconds = Some(21_600);
    let conditions = stuck.status.as_mut().and_then(|s| s.conditions.as_mut());
    if let Some(failed) = conditions.and_then(|c| c.first_mut()) {
        failed.reason = Some("DeadlineExceeded".into());
        failed.message = Some("Job was active longer than specified deadline".into());
    }
    let cache = Cache {
        jobs: vec![stuck],
        ..Cache::default()
    };
    let (_, seen) = reconcile_backup(
        backup("nightly", false),
        cache,
        empty_bucket(),
        final_status_and_event(),
    )
    .await;
    let status = status_of(&seen[0]);
    assert_eq!(status["phase"], "Failed");
    let completed = &status["conditions"][0];
    assert_eq!(completed["reason"], "DeadlineExceeded");
    assert!(
        status["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("backup Job nightly ran longer than its deadline of 21600s"),
        "{status:#}"
    );
    assert_eq!(seen[1].body["reason"], "DeadlineExceeded");
}

#[tokio::test]
async fn an_unreachable_store_is_retried_not_failed() {
    let bucket = MemoryBucket::default();
    bucket.set_unreachable(true);
    let mut finished_now = own_job(Some("Complete"));
    if let Some(status) = finished_now.status.as_mut() {
        status.completion_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    }
    let cache = Cache {
        jobs: vec![finished_now],
        ..Cache::default()
    };
    // Only the Warning Event: the phase stays as it was, and the error is retried with backoff.
    let script = vec![Expect::event(NS)];
    let (result, seen) = reconcile_backup(backup("nightly", false), cache, bucket, script).await;
    let error = result.expect_err("store errors are retried");
    assert_eq!(error.reason(), "StoreUnreachable");
    assert_eq!(seen[0].body["reason"], "StoreUnreachable");
}

#[tokio::test]
async fn a_scheduled_run_follows_the_cronjobs_job_without_starting_one() {
    let labels = json!({"app.kubernetes.io/managed-by": "tusk-operator"});
    let scheduled = job(
        "nightly",
        ("CronJob", "demo-backup", "cj-uid"),
        None,
        labels,
    );
    let cache = Cache {
        jobs: vec![scheduled],
        ..Cache::default()
    };
    let script = vec![Expect::apply_backup_status(NIGHTLY_STATUS)];
    let (_, seen) = reconcile_backup(backup("nightly", true), cache, empty_bucket(), script).await;
    assert_eq!(seen.len(), 1, "no Job is created for a scheduled run");
    assert_eq!(status_of(&seen[0])["phase"], "Running");
    assert_eq!(status_of(&seen[0])["startedAt"], "2026-11-22T02:00:00Z");
}

#[tokio::test]
async fn final_backups_make_no_calls() {
    let done = completed_backup("nightly", "2026-11-22T02:01:00Z");
    let (result, seen) = reconcile_backup(done, Cache::default(), empty_bucket(), vec![]).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    assert!(seen.iter().all(|s| s.method == Method::GET));
    assert!(seen.is_empty());
}

#[tokio::test]
async fn a_store_unreachable_for_long_after_the_job_fails_the_backup() {
    let bucket = MemoryBucket::default();
    bucket.set_unreachable(true);
    // The fixture's Job finished hours ago.
    let cache = succeeded_job();
    let script = final_status_and_event();
    let (result, seen) = reconcile_backup(backup("nightly", false), cache, bucket, script).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    assert_eq!(status_of(&seen[0])["phase"], "Failed");
    assert_eq!(
        status_of(&seen[0])["conditions"][0]["reason"],
        "StoreUnreachable"
    );
}
