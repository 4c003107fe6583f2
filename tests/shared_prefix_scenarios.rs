//! Mock-API scenarios for clusters sharing a bucket prefix (issue 12, defect 8): retention and
//! the `onDelete: Delete` finalizer delete only what this cluster (uid `c0ffee`) wrote — never
//! another uid's backups (a predecessor with the same name, the other side of a DR pair), never
//! the backup this cluster was restored from, never a cluster nested under its prefix.

mod support;

use std::sync::Arc;

use serde_json::json;
use support::memory_store::MemoryBucket;
use support::paths::BACKUPS;
use support::run::{against, reconcile_cluster};
use support::scripts::delete_finalizer;
use support::verifier::Expect;
use support::world::*;
use tusk::PostgreSQL;
use tusk::clusters::status::BackupSchedule;

const US: Option<&str> = Some("c0ffee");
const PEER: Option<&str> = Some("peer-uid");
/// A cluster `db` in namespace `team` whose destination path is `prod/demo`: its prefix
/// `prod/demo/team/db/` nests inside demo's `prod/demo/`.
const NESTED: &str = "prod/demo/team/db/n1/";

/// `pg` as restored from the backup `restored` of its own prefix (a re-created cluster).
fn restored_from_own_prefix(pg: &mut PostgreSQL) {
    let status = pg.status.get_or_insert_with(Default::default);
    status.restored_from = Some(
        serde_json::from_value(json!({"backupId": "restored",
            "location": "s3://backups/prod/demo/restored/",
            "restoredAt": "2026-11-01T00:00:00Z"}))
        .expect("restoredFrom"),
    );
}

/// demo's prefix with backups by three owners, and a nested cluster's backup.
fn shared_bucket() -> MemoryBucket {
    let bucket = MemoryBucket::default();
    for (id, completed, owner) in [
        ("restored", "2026-11-01T02:01:00Z", None),
        ("old", "2026-11-20T02:01:00Z", US),
        ("nightly", "2026-11-22T02:01:00Z", US),
        ("peer", "2026-11-22T03:01:00Z", PEER),
    ] {
        let json = owned_manifest_json(id, completed, owner);
        bucket.put(&format!("prod/demo/{id}/manifest.json"), json);
        bucket.put(&format!("prod/demo/{id}/app.dump.zst"), "dump");
    }
    let json = owned_manifest_json("n1", "2026-11-19T02:01:00Z", PEER);
    bucket.put(&format!("{NESTED}manifest.json"), json);
    bucket.put(&format!("{NESTED}app.dump.zst"), "dump");
    bucket
}

fn backup_ids(bucket: &MemoryBucket) -> Vec<String> {
    let mut ids: Vec<String> = bucket
        .keys()
        .iter()
        .filter_map(|k| k.strip_suffix("/manifest.json").map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn retention_deletes_only_our_own_backups_and_keeps_the_restored_one() {
    let spec = format!("{WITH_BACKUP}  retention: {{keep: 1}}\n");
    let (mut pg, mut cache) = converged(&spec, true, BackupSchedule::Scheduled);
    restored_from_own_prefix(&mut pg);
    let mut running = backup("nightly", false);
    running.status = serde_json::from_value(json!({"phase": "Running", "job": "nightly",
        "destination": {"s3": {"bucket": "backups"}}}))
    .expect("status");
    cache.jobs = vec![job(
        "nightly",
        ("Backup", "nightly", "uid-nightly"),
        Some("Complete"),
        json!({}),
    )];
    cache.backups = vec![
        completed_backup("old", "2026-11-20T02:01:00Z"),
        running.clone(),
    ];
    let bucket = shared_bucket();
    let script = vec![
        Expect::apply_backup_status(
            "/apis/tusk.dev/v1alpha1/namespaces/prod/backups/nightly/status",
        ),
        Expect::event(NS),
        // keep: 1 counts our backups only: `old` goes; the peer's newer one does not push
        // `nightly` out, and the restored one is not ours to count.
        Expect::delete(format!("{BACKUPS}/old")),
        Expect::event(NS),
    ];
    let (result, seen) = against(&pg, cache, bucket.clone(), script, |ctx| {
        tusk::backups::reconcile(Arc::new(running), ctx)
    })
    .await;
    result.expect("reconciled");
    assert_eq!(seen[3].body["reason"], "RetentionApplied");
    assert_eq!(
        backup_ids(&bucket),
        [
            "prod/demo/nightly",
            "prod/demo/peer",
            "prod/demo/restored",
            "prod/demo/team/db/n1"
        ]
    );
}

#[tokio::test]
async fn delete_removes_only_our_backups_under_a_shared_prefix() {
    let spec = format!("{WITH_BACKUP}  onDelete: Delete\n");
    let (mut pg, mut cache) = converged(&spec, true, BackupSchedule::Scheduled);
    pg.metadata.deletion_timestamp = Some(at(2_000));
    restored_from_own_prefix(&mut pg);
    cache.backups = vec![
        completed_backup("old", "2026-11-20T02:01:00Z"),
        completed_backup("nightly", "2026-11-22T02:01:00Z"),
    ];
    let bucket = shared_bucket();
    let script = delete_finalizer(&["nightly", "old"]);
    let (result, seen) = reconcile_cluster(pg, cache, bucket.clone(), script).await;
    result.expect("reconciled");
    assert_eq!(seen[3].body["reason"], "BackupsDeleted");
    let note = seen[3].body["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("kept") && note.contains("peer, restored"),
        "{note}"
    );
    assert_eq!(
        backup_ids(&bucket),
        [
            "prod/demo/peer",
            "prod/demo/restored",
            "prod/demo/team/db/n1"
        ],
        "the peer's, the restored and the nested cluster's backups stay"
    );
    assert!(bucket.keys().contains(&format!("{NESTED}app.dump.zst")));
}
