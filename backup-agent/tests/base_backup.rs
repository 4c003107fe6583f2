//! Physical base backups against a real PostgreSQL and MinIO (issue 27): `base-backup`
//! streams pg_basebackup into the bucket with the backup's WAL range in its manifest;
//! `base-restore` unpacks it, checked by sha256 and pg_verifybackup, and the archive takes the
//! restored server to a restore point. A damaged backup leaves no data directory behind. A
//! backup is complete only once the archive holds its WAL: without it, no manifest.

mod common;

use bytes::Bytes;
use common::agent::{agent, run_fails, run_ok};
use common::archive::{archived, archiving_server, base_restored, recovered, switch};
use common::postgres::PgServer;
use common::stores::{Kind, TestStore};

#[tokio::test]
async fn a_base_backup_and_the_archive_restore_to_a_point_in_time() {
    let store = TestStore::start(Kind::Minio).await;
    let source = archiving_server(&store);
    let system = source.psql(
        "postgres",
        "SELECT system_identifier FROM pg_control_system()",
    );
    source.psql(
        "postgres",
        "CREATE TABLE ledger (id int PRIMARY KEY, note text)",
    );
    source.psql(
        "postgres",
        "INSERT INTO ledger SELECT g, 'old' FROM generate_series(1, 500) g",
    );

    // As the operator's Jobs run it: the replication role, not a superuser.
    source.psql(
        "postgres",
        "CREATE ROLE tusk_replication WITH LOGIN REPLICATION PASSWORD 'replication-pw'",
    );
    let mut backup = agent(&store, "db", Some(&source));
    backup
        .env("PGUSER", "tusk_replication")
        .env("PGPASSWORD", "replication-pw")
        .args(["base-backup", "--backup-id", "base1"]);
    let done = run_ok(backup);
    let physical = &done["physical"];
    assert_eq!(physical["systemIdentifier"], system.as_str(), "{done}");
    assert_eq!(physical["timeline"], 1, "{done}");
    let keys = store.keys("nightly/tests/db/base1/").await;
    assert_eq!(
        keys,
        [
            "nightly/tests/db/base1/base.tar.zst",
            "nightly/tests/db/base1/claim.json",
            "nightly/tests/db/base1/manifest.json"
        ]
    );

    // After the backup: more rows, a restore point, then the mistake.
    source.psql(
        "postgres",
        "INSERT INTO ledger SELECT g, 'new' FROM generate_series(501, 1000) g",
    );
    source.psql("postgres", "SELECT pg_create_restore_point('before-drop')");
    source.psql("postgres", "DROP TABLE ledger");
    let last = switch(&source);
    archived(&source, &last).await;

    let target = tempfile::tempdir().unwrap();
    let (pgdata, restored) = base_restored(&store, target.path(), "latest");
    assert_eq!(restored["backupId"], "base1");
    assert!(pgdata.join("PG_VERSION").exists());
    assert!(
        pgdata.join("backup_label").exists(),
        "a backup, not a crashed server"
    );
    assert!(!target.path().join("restored.tusk-partial").exists());

    let to_restore_point =
        "recovery_target_name = 'before-drop'\nrecovery_target_action = 'promote'\n";
    let server = recovered(&store, &source, &pgdata, to_restore_point).await;
    assert_eq!(
        server.psql(
            "postgres",
            "SELECT count(*) || ' ' || count(*) FILTER (WHERE note = 'new') FROM ledger"
        ),
        "1000 500"
    );
}

#[tokio::test]
async fn a_damaged_base_backup_is_refused_and_leaves_no_data_directory() {
    let store = TestStore::start(Kind::Minio).await;
    let source = archiving_server(&store);
    let mut backup = agent(&store, "db", Some(&source));
    backup.args(["base-backup", "--backup-id", "base1"]);
    run_ok(backup);
    let key = "nightly/tests/db/base1/base.tar.zst";
    let mut bytes = backup_store::store::get_bytes(store.store.as_ref(), key)
        .await
        .unwrap()
        .to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    store.store.put(key, Bytes::from(bytes)).await.unwrap();

    let target = tempfile::tempdir().unwrap();
    let pgdata = target.path().join("restored");
    let mut restore = agent(&store, "db", None);
    restore
        .args(["base-restore", "--backup-id", "base1", "--pgdata"])
        .arg(&pgdata);
    let failed = run_fails(restore, 5, "base.tar.zst");
    assert!(!pgdata.exists(), "{failed}");
    assert!(!target.path().join("restored.tusk-partial").exists());

    // A logical backup is not a base backup.
    let mut logical = agent(&store, "db", Some(&source));
    logical.args(["backup", "--backup-id", "dump1"]);
    run_ok(logical);
    let mut restore = agent(&store, "db", None);
    restore
        .args(["base-restore", "--backup-id", "dump1", "--pgdata"])
        .arg(&pgdata);
    run_fails(restore, 2, "is a logical backup, not a physical one");
}

#[tokio::test]
async fn a_base_backup_whose_wal_never_reaches_the_archive_is_not_completed() {
    let store = TestStore::start(Kind::Minio).await;
    let source = PgServer::start();
    let mut backup = agent(&store, "db", Some(&source));
    backup.args([
        "base-backup",
        "--backup-id",
        "base1",
        "--wal-wait-seconds",
        "3",
    ]);
    let failed = run_fails(backup, 8, "the archive still lacks WAL segment 00000001");
    assert!(failed.contains("spec.backup.walArchive"), "{failed}");
    // Nothing is left that a restore or the catalog could take for a backup.
    assert_eq!(
        store.keys("nightly/tests/db/base1/").await,
        Vec::<String>::new()
    );
}

/// Archiving on and failing: PostgreSQL's `pg_backup_stop` waits for the archive, for ever
/// (issue 46, low). The backup fails within its WAL wait, with nothing left in the bucket.
#[tokio::test]
async fn a_base_backup_from_a_primary_whose_archiving_fails_gives_up_at_its_wal_wait() {
    let store = TestStore::start(Kind::Minio).await;
    let source = PgServer::start();
    for setting in ["archive_mode = 'on'", "archive_command = 'false'"] {
        source.psql("postgres", &format!("ALTER SYSTEM SET {setting}"));
    }
    source.restart();
    let mut backup = agent(&store, "db", Some(&source));
    backup.args([
        "base-backup",
        "--backup-id",
        "base1",
        "--wal-wait-seconds",
        "3",
    ]);
    // Bounded here: before, the agent waited with the server as long as the test ran.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(run_fails(
            backup,
            8,
            "pg_backup_stop still waits for the archive",
        ));
    });
    let failed = finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the base backup ended within two minutes");
    assert!(failed.contains("ContinuousArchiving"), "{failed}");
    assert_eq!(
        store.keys("nightly/tests/db/base1/").await,
        Vec::<String>::new()
    );
}
