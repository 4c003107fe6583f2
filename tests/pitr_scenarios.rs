//! Mock-API scenarios for a point-in-time restore (`spec.restore.target`): no Job, the first pod
//! restores and recovers (the StatefulSet carries the source and the target), clients are held
//! and `Restored` waits until the database serves, which it does only once promoted at the
//! target.

mod support;

use serde_json::Value;
use support::memory_store::MemoryBucket;
use support::paths::{STATEFULSETS, STATUS};
use support::read::condition;
use support::run::reconcile_cluster as run;
use support::scripts::restore_finished;
use support::verifier::Expect;
use support::world::*;
use tusk::clusters::status::BackupSchedule;

const POINT_IN_TIME: &str = r#"
storage: {size: 1Gi}
restore:
  objectStore:
    cluster: shop
    backupId: base1
    destination: {s3: {bucket: backups, path: p}}
  target: {time: "2026-11-28T10:00:00Z"}
"#;

fn env_of<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?["value"]
        .as_str()
}

#[test]
fn the_first_pod_is_told_what_to_restore_and_where_to_stop() {
    let pg = postgresql(POINT_IN_TIME);
    let cluster = tusk::resources::Cluster::new(&pg).expect("cluster");
    let sts = tusk::resources::statefulset(&cluster, "sum", &agent());
    let sts = serde_json::to_value(&sts).expect("statefulset");
    let pod = &sts["spec"]["template"]["spec"];
    let postgres = &pod["containers"][0];
    assert_eq!(env_of(postgres, "TUSK_RESTORE_BACKUP_ID"), Some("base1"));
    assert_eq!(
        env_of(postgres, "TUSK_RESTORE_TARGET_TIME"),
        Some("2026-11-28T10:00:00Z")
    );
    assert_eq!(env_of(postgres, "RESTORE_TUSK_CLUSTER"), Some("shop"));
    assert_eq!(env_of(postgres, "RESTORE_TUSK_BUCKET"), Some("backups"));
    let install = pod["initContainers"][0]["command"].to_string();
    assert!(install.contains("/usr/local/bin/backup-agent"), "{install}");
}

#[tokio::test]
async fn a_point_in_time_restore_starts_no_job_and_holds_clients_while_recovering() {
    let (mut pg, cache) = converged(POINT_IN_TIME, false, BackupSchedule::NotConfigured);
    not_ready_status(&mut pg, BackupSchedule::NotConfigured);
    let script = vec![Expect::apply_status(STATUS)];
    let (result, seen) = run(pg, cache, MemoryBucket::default(), script).await;
    result.expect("reconciled");
    let status = &seen[0].body;
    let restored = condition(status, "Restored");
    assert_eq!(restored["reason"], "Recovering", "{restored}");
    let message = restored["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("base backup base1 of prod/shop")
            && message.contains("2026-11-28T10:00:00Z"),
        "{message}"
    );
    assert_eq!(condition(status, "Ready")["status"], "False");
}

#[tokio::test]
async fn a_point_in_time_restore_is_recorded_once_the_database_serves() {
    let (mut pg, mut cache) = converged(POINT_IN_TIME, true, BackupSchedule::NotConfigured);
    not_ready_status(&mut pg, BackupSchedule::NotConfigured);
    cache.pods = vec![support::replicas::pod(
        "demo-0",
        "primary",
        true,
        "10.0.0.10",
    )];
    let script = restore_finished();
    let (result, seen) = run(pg, cache, MemoryBucket::default(), script).await;
    result.expect("reconciled");
    assert_eq!(seen[0].body["endpoints"][0]["addresses"][0], "10.0.0.10");
    let status = &seen[2].body;
    assert_eq!(condition(status, "Restored")["status"], "True");
    assert_eq!(condition(status, "Ready")["status"], "True");
    assert_eq!(status["status"]["restoredFrom"]["backupId"], "base1");
    assert_eq!(
        status["status"]["restoredFrom"]["location"],
        "s3://backups/p/prod/shop/base1/"
    );
}

/// A reconcile of the point-in-time cluster before its StatefulSet exists, against `bucket`:
/// the StatefulSet it applies and the status it writes, then the Warning Event of a restore
/// refused for good (`refused`).
async fn before_any_pod(bucket: MemoryBucket, refused: bool) -> (Value, Value, Option<Value>) {
    let (mut pg, mut cache) = converged(POINT_IN_TIME, false, BackupSchedule::NotConfigured);
    not_ready_status(&mut pg, BackupSchedule::NotConfigured);
    cache.statefulsets.clear();
    let mut script = vec![
        Expect::apply(format!("{STATEFULSETS}/demo")),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ];
    if refused {
        script.push(Expect::event(NS));
    }
    let (result, seen) = run(pg, cache, bucket, script).await;
    result.expect("reconciled");
    let warning = seen.get(3).map(|s| s.body.clone());
    (seen[0].body.clone(), seen[2].body.clone(), warning)
}

/// Base backup `base1` of `prod/shop` (system 7) completed at 09:00, and its WAL archived
/// until `archived`.
fn source_archive(archived: &str) -> MemoryBucket {
    let bucket = MemoryBucket::default();
    let manifest = serde_json::json!({
        "formatVersion": 1, "backupId": "base1", "namespace": NS, "cluster": "shop",
        "startedAt": "2026-11-28T08:59:00Z", "completedAt": "2026-11-28T09:00:00Z",
        "serverVersion": "18.1", "pgDumpVersion": "pg_basebackup (PostgreSQL) 18.1",
        "compression": "zstd", "files": [],
        "physical": {"systemIdentifier": "7", "timeline": 1, "startLsn": "0/3000028",
                     "stopLsn": "0/3000100", "walSegmentSize": 16 << 20}});
    bucket.put("p/prod/shop/base1/manifest.json", manifest.to_string());
    let segment = "p/prod/shop/wal/7/00000001/000000010000000000000004.zst";
    bucket.put_at(segment, "wal", archived);
    bucket
}

#[tokio::test]
async fn a_target_no_base_backup_reaches_is_refused_and_no_pod_starts() {
    let (sts, status, warning) = before_any_pod(MemoryBucket::default(), true).await;
    assert_eq!(sts["spec"]["replicas"], 0, "no pod may start the restore");
    let restored = condition(&status, "Restored");
    assert_eq!(restored["reason"], "NoBaseBackup", "{restored}");
    let warning = warning.expect("a Warning Event");
    assert_eq!(warning["type"], "Warning", "{warning}");
    assert_eq!(condition(&status, "Ready")["status"], "False");
}

#[tokio::test]
async fn a_target_after_the_archive_waits_and_no_pod_starts() {
    let (sts, status, _) = before_any_pod(source_archive("2026-11-28T09:30:00Z"), false).await;
    assert_eq!(sts["spec"]["replicas"], 0);
    let restored = condition(&status, "Restored");
    assert_eq!(restored["reason"], "TargetNotArchived", "{restored}");
    let message = restored["message"].as_str().unwrap_or_default();
    assert!(message.contains("2026-11-28T09:30:00Z"), "{message}");
}

#[tokio::test]
async fn a_reachable_target_starts_the_first_pod() {
    let (sts, status, _) = before_any_pod(source_archive("2026-11-28T10:05:00Z"), false).await;
    assert_eq!(sts["spec"]["replicas"], 1);
    assert_eq!(condition(&status, "Restored")["reason"], "Recovering");
}

#[tokio::test]
async fn a_failed_recovery_is_named_in_the_restored_condition() {
    use std::sync::Arc;
    use support::replicas::{Managers, pod};
    use tusk::runtime::instances::InstanceStatus;

    let (mut pg, mut cache) = converged(POINT_IN_TIME, false, BackupSchedule::NotConfigured);
    not_ready_status(&mut pg, BackupSchedule::NotConfigured);
    cache
        .pods
        .push(pod("demo-0", "replica", false, "10.0.0.10"));
    let why = "restoring backup base1: the recovery stopped (exit status: 1) before promoting: \
               PostgreSQL said \"FATAL:  recovery ended before configured recovery target was \
               reached\"";
    let report = InstanceStatus {
        pod: "demo-0".into(),
        restore_error: Some(why.into()),
        ..InstanceStatus::default()
    };
    let (client, server) = support::verifier::client();
    let ctx = plain_context(client, &pg, cache, MemoryBucket::default())
        .with_instances(Arc::new(Managers(vec![("10.0.0.10", report)])));
    let reconcile = tusk::clusters::reconcile(Arc::new(pg), Arc::new(ctx));
    // The pod's role label first (the HA step's), then the status.
    let script = vec![
        Expect::apply("/api/v1/namespaces/prod/pods/demo-0"),
        Expect::apply_status(STATUS),
    ];
    let (action, seen) = server.play_during(script, Box::pin(reconcile)).await;
    action.expect("reconciled");
    let restored = condition(&seen[1].body, "Restored");
    assert_eq!(restored["reason"], "RestoreFailed", "{restored}");
    let message = restored["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("demo-0: restoring backup base1")
            && message.contains("recovery ended before configured recovery target"),
        "{message}"
    );
}
