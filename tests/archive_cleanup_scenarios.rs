//! The `onDelete: Delete` finalizer of a cluster that archives WAL (`spec.backup.walArchive`):
//! its pods go before its prefix is emptied (a primary archiving meanwhile would leave WAL
//! behind), and only its own system's WAL is deleted, never a predecessor's of the same name,
//! nor its own while a predecessor's base backup of the same system (a restore in place) stays.

mod support;

use std::time::Duration;

use kube::runtime::controller::Action;
use support::memory_store::MemoryBucket;
use support::paths::{CRONJOBS, STATEFULSETS, STATUS};
use support::read::condition;
use support::replicas::pod;
use support::run::reconcile_cluster as run;
use support::scripts::delete_finalizer;
use support::verifier::Expect;
use support::world::*;
use tusk::PostgreSQL;
use tusk::clusters::status::BackupSchedule;

/// The system this cluster's first primary recorded.
const SYSTEM: &str = "7400000000000000001";
/// A predecessor's WAL: a cluster of the same name deleted with `Retain`.
const PREDECESSORS: &str =
    "prod/demo/wal/7300000000000000009/00000001/000000010000000000000001.zst";

fn archiving_and_deleted() -> (PostgreSQL, Cache) {
    let spec = format!("{WITH_BACKUP}  onDelete: Delete\n  walArchive: {{}}\n");
    let (mut pg, mut cache) = converged(&spec, true, BackupSchedule::Scheduled);
    pg.metadata.deletion_timestamp = Some(at(2_000));
    pg.status.get_or_insert_default().system_identifier = Some(SYSTEM.into());
    cache.backups = vec![completed_backup("b1", "2026-11-21T02:01:00Z")];
    (pg, cache)
}

fn bucket() -> MemoryBucket {
    let bucket = MemoryBucket::default();
    for key in [
        "prod/demo/b1/manifest.json".to_owned(),
        format!("prod/demo/wal/{SYSTEM}/00000001/000000010000000000000001.zst"),
        format!("prod/demo/wal/{SYSTEM}/history/00000002.history.zst"),
        PREDECESSORS.to_owned(),
    ] {
        bucket.put(&key, "x");
    }
    bucket
}

#[tokio::test]
async fn the_pods_of_an_archiving_cluster_go_before_its_prefix_is_emptied() {
    let (pg, mut cache) = archiving_and_deleted();
    cache.set_pods(&pg, vec![pod("demo-0", "primary", true, "10.0.0.10")]);
    let bucket = bucket();
    let script = vec![
        Expect::delete(format!("{STATEFULSETS}/demo")),
        Expect::apply_status(STATUS),
    ];
    let (result, seen) = run(pg, cache, bucket.clone(), script).await;
    assert_eq!(
        result.expect("waits"),
        Action::requeue(Duration::from_secs(2))
    );
    let cleanup = condition(&seen[1].body, "Cleanup");
    assert_eq!(cleanup["reason"], "WaitingForArchiver", "{cleanup}");
    assert_eq!(
        bucket.keys().len(),
        4,
        "nothing deleted while a primary may archive"
    );
}

#[tokio::test]
async fn once_they_are_gone_its_own_systems_wal_goes_and_a_predecessors_stays() {
    let (pg, mut cache) = archiving_and_deleted();
    cache.statefulsets.clear();
    let bucket = bucket();
    // Both CronJobs go first: the base-backup one exists because the cluster archives.
    let mut script = delete_finalizer(&["b1"]);
    script.insert(1, Expect::delete(format!("{CRONJOBS}/demo-base")));
    let (result, seen) = run(pg, cache, bucket.clone(), script).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    assert_eq!(bucket.keys(), [PREDECESSORS]);
    let note = seen[3].body["note"].as_str().unwrap_or_default();
    assert!(note.starts_with("deleted 3 object(s)"), "{note}");
}

#[tokio::test]
async fn a_cluster_restored_in_place_keeps_the_wal_its_predecessors_base_backup_needs() {
    let (pg, mut cache) = archiving_and_deleted();
    cache.statefulsets.clear();
    let bucket = bucket();
    // The predecessor (another uid, deleted with Retain) left a base backup of the same system:
    // this cluster was restored from it, in place, and archived on a timeline of its own.
    let manifest = serde_json::json!({
        "formatVersion": 1, "backupId": "old-base", "namespace": "prod", "cluster": "demo",
        "clusterUid": "uid-of-the-predecessor",
        "startedAt": "2026-11-20T08:59:00Z", "completedAt": "2026-11-20T09:00:00Z",
        "serverVersion": "15", "pgDumpVersion": "pg_basebackup (PostgreSQL) 15",
        "compression": "zstd", "files": [],
        "physical": {"systemIdentifier": SYSTEM, "timeline": 1, "startLsn": "0/1000028",
                     "stopLsn": "0/1000100", "walSegmentSize": 16 << 20}});
    bucket.put("prod/demo/old-base/manifest.json", manifest.to_string());
    let mut script = delete_finalizer(&["b1"]);
    script.insert(1, Expect::delete(format!("{CRONJOBS}/demo-base")));
    let (result, seen) = run(pg, cache, bucket.clone(), script).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    let wal = format!("prod/demo/wal/{SYSTEM}/00000001/000000010000000000000001.zst");
    assert!(
        bucket.keys().contains(&wal),
        "the WAL old-base restores with: {:?}",
        bucket.keys()
    );
    let note = seen[3].body["note"].as_str().unwrap_or_default();
    assert!(note.starts_with("deleted 1 object(s)"), "{note}");
    assert!(note.contains("base backup(s) old-base"), "{note}");
}
