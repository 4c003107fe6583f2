//! Retention by recovery window on a real archive (issue 27 §5): with two base backups and
//! the WAL of a real server in MinIO, a window past the older backup deletes it and exactly
//! the segments before the newer one's start; the newer one still restores to a point after it.

mod common;

use backup_store::ClusterLocation;
use backup_store::lsn::Lsn;
use backup_store::store::s3::S3Store;
use common::agent::{agent, run_ok};
use common::archive::{archived, archiving_server, base_restored, recovered, switch};
use common::postgres::PgServer;
use common::stores::{Kind, TestStore};

const SEGMENT: u64 = 16 << 20;

/// Takes base backup `id` and returns its start LSN.
fn base_backup(store: &TestStore, source: &PgServer, id: &str) -> Lsn {
    let mut backup = agent(store, "db", Some(source));
    backup.args(["base-backup", "--backup-id", id]);
    let done = run_ok(backup);
    let start = done["physical"]["startLsn"].as_str().expect("a start LSN");
    Lsn::parse(start).expect("a WAL position")
}

/// Writes rows labelled `note` and closes three segments.
fn rows_and_segments(source: &PgServer, note: &str) -> String {
    let mut last = String::new();
    for _ in 0..3 {
        source.psql(
            "postgres",
            &format!("INSERT INTO ledger (note) SELECT '{note}' FROM generate_series(1, 100)"),
        );
        last = switch(source);
    }
    last
}

#[tokio::test(flavor = "multi_thread")]
async fn a_window_deletes_the_older_base_backup_and_only_the_wal_before_the_newer_one() {
    let store = TestStore::start(Kind::Minio).await;
    let source = archiving_server(&store);
    let system: u64 = source
        .psql(
            "postgres",
            "SELECT system_identifier FROM pg_control_system()",
        )
        .parse()
        .expect("a system identifier");
    source.psql(
        "postgres",
        "CREATE TABLE ledger (id serial PRIMARY KEY, note text)",
    );
    rows_and_segments(&source, "before-base1");
    base_backup(&store, &source, "base1");
    rows_and_segments(&source, "between");
    let base2_start = base_backup(&store, &source, "base2");
    rows_and_segments(&source, "after-base2");
    source.psql("postgres", "SELECT pg_create_restore_point('later')");
    source.psql("postgres", "DELETE FROM ledger");
    let last = switch(&source);
    archived(&source, &last).await;

    let s3 = S3Store::new(common::stores::s3_config(
        store.endpoint(),
        common::stores::BUCKET,
        common::minio::SECRET_KEY,
    ))
    .await
    .expect("the store");
    let db = ClusterLocation::new("nightly", "tests", "db").expect("a location");
    let wal_folder = format!("{}00000001/", db.wal_prefix(system));
    let before = store.keys(&wal_folder).await;
    // Two hours on, with a one-hour window: base2 is where a restore to the window's first
    // second starts, so base1 and the WAL only it needed go.
    let policy = backup_store::retention::Policy {
        recovery_window: Some(std::time::Duration::from_secs(3600)),
        ..Default::default()
    };
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2);
    let owner = backup_store::Owner::new(None);
    let report = backup_store::prune::prune(&s3, &db, &owner, policy, later)
        .await
        .expect("prune");
    assert_eq!(report.deleted, ["base1"], "{report:?}");

    let after = store.keys(&wal_folder).await;
    let start_of = |key: &String| {
        let name = key.strip_prefix(&wal_folder).expect("under the folder");
        Lsn::of_segment(name, SEGMENT).expect("a segment")
    };
    let (gone, kept): (Vec<&String>, Vec<&String>) =
        before.iter().partition(|k| !after.contains(k));
    assert!(!gone.is_empty(), "nothing deleted from {before:?}");
    assert_eq!(report.wal_objects_deleted, gone.len());
    for key in &gone {
        assert!(
            start_of(key).0 + SEGMENT <= base2_start.0,
            "{key} was needed from {base2_start}"
        );
    }
    for key in &kept {
        assert!(
            start_of(key).0 + SEGMENT > base2_start.0,
            "{key} kept though before {base2_start}"
        );
    }

    // What is left still restores: base2 and the WAL after it, to the restore point.
    let target = tempfile::tempdir().expect("a directory");
    let (pgdata, restored) = base_restored(&store, target.path(), "latest");
    assert_eq!(restored["backupId"], "base2");
    let to_point = "recovery_target_name = 'later'\nrecovery_target_action = 'promote'\n";
    let server = recovered(&store, &source, &pgdata, to_point).await;
    assert_eq!(
        server.psql(
            "postgres",
            "SELECT count(*) FROM ledger WHERE note = 'after-base2'"
        ),
        "300"
    );
    assert_eq!(
        server.psql("postgres", "SELECT count(*) FROM ledger"),
        "900"
    );
}
