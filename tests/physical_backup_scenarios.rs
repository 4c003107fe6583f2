//! Mock-API scenarios for physical Backups (issue 27): the base-backup Job, a cluster that
//! does not archive, and retention by recovery window.

mod support;

use kube::runtime::controller::Action;
use serde_json::{Value, json};
use support::backup_run::*;
use support::memory_store::MemoryBucket;
use support::paths::{BACKUPS, NIGHTLY_STATUS};
use support::scripts::nightly_job_started;
use support::verifier::Expect;
use support::world::*;

#[tokio::test]
async fn a_physical_backup_streams_from_the_replication_role_into_the_archive_layout() {
    let mut b = backup("nightly", false);
    b.spec.method = tusk::crd::BackupMethod::Physical;
    let script = nightly_job_started();
    let (result, seen) = reconcile_backup_of(
        "  walArchive: {}\n",
        b,
        Cache::default(),
        empty_bucket(),
        script,
    )
    .await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    let container = &seen[0].body["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["args"], json!(["base-backup"]));
    let env = container["env"].as_array().expect("env");
    let user = env.iter().find(|e| e["name"] == "PGUSER").expect("PGUSER");
    assert_eq!(
        user["valueFrom"]["secretKeyRef"]["name"], "demo-replication",
        "{user}"
    );
    assert_eq!(status_of(&seen[1])["phase"], "Running");
}

#[tokio::test]
async fn a_physical_backup_of_a_cluster_that_does_not_archive_fails_at_once() {
    let mut b = backup("nightly", false);
    b.spec.method = tusk::crd::BackupMethod::Physical;
    let (result, seen) = reconcile_backup(
        b,
        Cache::default(),
        empty_bucket(),
        final_status_and_event(),
    )
    .await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    let status = status_of(&seen[0]);
    assert_eq!(status["phase"], "Failed");
    assert_eq!(status["conditions"][0]["reason"], "NotArchiving");
    assert_eq!(seen[1].body["reason"], "NotArchiving");
}

/// The manifest of base backup `id` of `demo` (system 7, 16 MiB segments), replaying from
/// `start`.
fn base_manifest_json(id: &str, completed_at: &str, start: &str) -> Vec<u8> {
    let mut manifest: Value = serde_json::from_slice(&manifest_json(id, completed_at)).unwrap();
    manifest["files"] =
        json!([{"name": "base.tar.zst", "kind": "base", "sizeBytes": 1000, "sha256": "cc"}]);
    manifest["physical"] = json!({"systemIdentifier": "7", "timeline": 1, "startLsn": start,
        "stopLsn": start, "walSegmentSize": 16 << 20});
    serde_json::to_vec(&manifest).unwrap()
}

#[tokio::test]
async fn a_recovery_window_deletes_the_base_backups_and_wal_it_no_longer_needs() {
    let bucket = MemoryBucket::default();
    let old = base_manifest_json("base-old", "2026-11-10T02:01:00Z", "0/2000028");
    bucket.put(&format!("{PREFIX}base-old/manifest.json"), old);
    bucket.put(&format!("{PREFIX}base-old/base.tar.zst"), "old base");
    let new = base_manifest_json("nightly", "2026-11-22T02:01:00Z", "0/9000028");
    bucket.put(&format!("{PREFIX}nightly/manifest.json"), new);
    bucket.put(&format!("{PREFIX}nightly/base.tar.zst"), "new base");
    for segment in ["000000010000000000000003", "000000010000000000000009"] {
        bucket.put(&format!("{PREFIX}wal/7/00000001/{segment}.zst"), "wal");
    }
    bucket.put(
        &format!("{PREFIX}wal/7/history/00000002.history.zst"),
        "history",
    );
    let mut running = backup("nightly", false);
    running.spec.method = tusk::crd::BackupMethod::Physical;
    running.status = serde_json::from_value(json!({"phase": "Running", "job": "nightly",
        "destination": {"s3": {"bucket": "backups"}}}))
    .expect("status");
    let mut old_backup = completed_backup("base-old", "2026-11-10T02:01:00Z");
    old_backup.spec.method = tusk::crd::BackupMethod::Physical;
    let cache = Cache {
        jobs: vec![own_job(Some("Complete"))],
        backups: vec![old_backup, running.clone()],
        ..Cache::default()
    };
    let script = vec![
        Expect::apply_backup_status(NIGHTLY_STATUS),
        Expect::event(NS),
        Expect::delete(format!("{BACKUPS}/base-old")),
        Expect::event(NS),
    ];
    let extra = "  walArchive: {}\n  retention: {recoveryWindow: 1d}\n";
    let (result, seen) = reconcile_backup_with(extra, running, cache, bucket.clone(), script).await;
    result.expect("reconciled");
    let status = status_of(&seen[0]);
    assert_eq!(status["phase"], "Completed");
    assert_eq!(status["physical"]["startLsn"], "0/9000028");
    assert_eq!(seen[3].body["reason"], "RetentionApplied");
    assert_eq!(
        bucket.keys(),
        [
            "prod/demo/nightly/base.tar.zst",
            "prod/demo/nightly/manifest.json",
            "prod/demo/wal/7/00000001/000000010000000000000009.zst",
            "prod/demo/wal/7/history/00000002.history.zst",
        ],
        "the older base backup and the segment before the newer one's start are deleted"
    );
}

#[tokio::test]
async fn a_scheduled_base_backup_follows_the_base_cronjobs_job() {
    let labels = json!({"app.kubernetes.io/managed-by": "tusk-operator"});
    let run = |cronjob| {
        job(
            "nightly",
            ("CronJob", cronjob, "cj-uid"),
            None,
            labels.clone(),
        )
    };
    let mut scheduled = backup("nightly", true);
    scheduled.spec.method = tusk::crd::BackupMethod::Physical;
    let cache = Cache {
        jobs: vec![run("demo-base")],
        ..Cache::default()
    };
    let script = vec![Expect::apply_backup_status(NIGHTLY_STATUS)];
    let archiving = "  walArchive: {}\n";
    let (_, seen) =
        reconcile_backup_of(archiving, scheduled.clone(), cache, empty_bucket(), script).await;
    assert_eq!(seen.len(), 1, "no Job is created for a scheduled run");
    assert_eq!(status_of(&seen[0])["phase"], "Running");
    // A Job of the logical CronJob is not this physical Backup's run.
    let cache = Cache {
        jobs: vec![run("demo-backup")],
        ..Cache::default()
    };
    let script = final_status_and_event();
    let (_, seen) = reconcile_backup_of(archiving, scheduled, cache, empty_bucket(), script).await;
    assert_eq!(status_of(&seen[0])["phase"], "Failed", "{}", seen[0].body);
}
