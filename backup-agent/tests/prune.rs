//! Retention over more than 1,000 objects, with clusters `db` and `db2` sharing a name prefix.

mod common;

use bytes::Bytes;
use futures::StreamExt;

use backup_store::compression::Compression;
use backup_store::layout::ClusterLocation;
use backup_store::manifest::{FORMAT_VERSION, FileKind, Manifest, ManifestFile};
use backup_store::store::ObjectStore;
use common::agent::{NAMESPACE, agent, run_ok};
use common::stores::{Kind, TestStore};

/// Enough that one cluster alone holds more than 1,000 objects (list pagination).
const FILES_PER_BACKUP: usize = 170;
/// Ages in days of the synthetic backups of each cluster.
const AGES: &[i64] = &[100, 50, 40, 20, 10, 1];

fn id_for(age: i64) -> String {
    format!("age{age:03}d")
}

/// Writes a complete-looking backup directly (many small files + manifest).
async fn fake_backup(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    age_days: i64,
    with_manifest: bool,
) {
    let id = id_for(age_days);
    let keys: Vec<String> = (0..FILES_PER_BACKUP)
        .map(|i| location.object_key(&id, &format!("part-{i:04}")))
        .collect();
    let results: Vec<_> = futures::stream::iter(keys)
        .map(|key| async move { store.put(&key, Bytes::from_static(b"x")).await })
        .buffer_unordered(16)
        .collect()
        .await;
    results
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .expect("put objects");
    if !with_manifest {
        return;
    }
    let completed = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24 * age_days);
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        backup_id: id.clone(),
        namespace: NAMESPACE.into(),
        cluster: location.cluster().into(),
        cluster_uid: None,
        started_at: completed,
        completed_at: completed,
        server_version: "15".into(),
        pg_dump_version: "pg_dump (PostgreSQL) 15".into(),
        compression: Compression::None,
        files: vec![ManifestFile {
            name: "part-0000".into(),
            kind: FileKind::Globals,
            database: None,
            database_owner: None,
            size_bytes: 1,
            sha256: String::new(),
            database_size_bytes: None,
            tables: None,
        }],
        physical: None,
    };
    store
        .put(
            &location.manifest_key(&id),
            Bytes::from(manifest.to_json().unwrap()),
        )
        .await
        .expect("put manifest");
}

fn ids_in(keys: &[String], prefix: &str) -> Vec<String> {
    let mut ids: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            k.strip_prefix(prefix)?
                .split('/')
                .next()
                .map(str::to_string)
        })
        .collect();
    ids.dedup();
    ids
}

async fn prune_across_clusters(kind: Kind) {
    let store = TestStore::start(kind).await;
    let db = ClusterLocation::new("nightly", NAMESPACE, "db").unwrap();
    let db2 = ClusterLocation::new("nightly", NAMESPACE, "db2").unwrap();
    for age in AGES {
        fake_backup(store.store.as_ref(), &db, *age, true).await;
        fake_backup(store.store.as_ref(), &db2, *age, true).await;
    }
    // An old backup without manifest does not exist for retention: left alone.
    fake_backup(store.store.as_ref(), &db, 300, false).await;
    let all = store.keys("nightly/").await;
    assert!(all.len() > 1000, "only {} objects", all.len());

    let mut prune = agent(&store, "db", None);
    prune.args(["prune", "--keep", "2", "--max-age", "30d"]);
    let report = run_ok(prune);
    assert_eq!(
        report["deleted"],
        serde_json::json!(["age100d", "age050d", "age040d", "age020d"])
    );

    let keys = store.keys("nightly/").await;
    assert_eq!(
        ids_in(&keys, "nightly/tests/db/"),
        ["age001d", "age010d", "age300d"]
    );
    let db2_keys: Vec<&String> = all
        .iter()
        .filter(|k| k.starts_with("nightly/tests/db2/"))
        .collect();
    let db2_after: Vec<&String> = keys
        .iter()
        .filter(|k| k.starts_with("nightly/tests/db2/"))
        .collect();
    assert_eq!(db2_keys, db2_after, "db2 must be untouched");
    assert_eq!(
        keys.iter()
            .filter(|k| k.starts_with("nightly/tests/db/age010d/"))
            .count(),
        FILES_PER_BACKUP + 1
    );

    // max-age alone would remove everything; the newest complete backup survives.
    let mut prune = agent(&store, "db", None);
    prune.args(["prune", "--max-age", "1h"]);
    let report = run_ok(prune);
    assert_eq!(report["deleted"], serde_json::json!(["age010d"]));
    assert_eq!(report["kept"], serde_json::json!(["age001d"]));

    // delete removes exactly one backup of db2.
    let mut delete = agent(&store, "db2", None);
    delete.args(["delete", "--backup-id", "age050d"]);
    run_ok(delete);
    let keys = store.keys("nightly/tests/db2/").await;
    assert_eq!(
        ids_in(&keys, "nightly/tests/db2/"),
        ["age001d", "age010d", "age020d", "age040d", "age100d"]
    );
    assert_eq!(keys.len(), 5 * (FILES_PER_BACKUP + 1));

    // The operator's onDelete: Delete removes all of db and nothing of db2.
    let owner = backup_store::Owner::new(None);
    let removed = backup_store::catalog::delete_cluster(store.store.as_ref(), &db, &owner)
        .await
        .unwrap();
    assert_eq!(removed.objects_deleted, FILES_PER_BACKUP * 2 + 1);
    assert!(store.keys("nightly/tests/db/").await.is_empty());
    assert_eq!(
        store.keys("nightly/tests/db2/").await.len(),
        5 * (FILES_PER_BACKUP + 1)
    );
}

on_each_store!(prune_across_clusters);

/// An agent killed with SIGKILL cannot abort its multipart upload; prune cleans it up once it is
/// over an hour old, and only under its own cluster's prefix.
#[tokio::test(flavor = "multi_thread")]
async fn prune_aborts_stale_multipart_uploads_minio() {
    use backup_store::store::s3::S3Store;
    let store = TestStore::start(Kind::Minio).await;
    let s3 = S3Store::new(common::stores::s3_config(
        store.endpoint(),
        common::stores::BUCKET,
        common::minio::SECRET_KEY,
    ))
    .await
    .unwrap();
    for key in [
        "nightly/tests/db/dead/db-app.pgdump.zst",
        "nightly/tests/db2/dead/db-app.pgdump.zst",
    ] {
        s3.client()
            .create_multipart_upload()
            .bucket(common::stores::BUCKET)
            .key(key)
            .send()
            .await
            .unwrap();
    }
    let db = ClusterLocation::new("nightly", NAMESPACE, "db").unwrap();
    let policy = backup_store::retention::Policy {
        keep: Some(1),
        max_age: None,
        recovery_window: None,
    };
    let owner = backup_store::Owner::new(None);
    // Fresh uploads may belong to a running backup: left alone.
    let report = backup_store::prune::prune(&s3, &db, &owner, policy, jiff::Timestamp::now())
        .await
        .unwrap();
    assert_eq!(report.aborted_uploads, 0);
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2);
    let report = backup_store::prune::prune(&s3, &db, &owner, policy, later)
        .await
        .unwrap();
    assert_eq!(report.aborted_uploads, 1);
    assert!(
        s3.pending_uploads("nightly/tests/db/")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s3.pending_uploads("nightly/tests/db2/")
            .await
            .unwrap()
            .len(),
        1
    );
}
