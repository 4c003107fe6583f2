//! Backup → restore into a fresh server → identical data, against MinIO and the GCS emulator.

mod common;

use common::agent::{agent, db_agent, run_fails, run_ok, summary};
use common::postgres::PgServer;
use common::seed;
use common::stores::{Kind, TestStore};

async fn round_trip(kind: Kind, compression: &str) {
    let store = TestStore::start(kind).await;
    let source = PgServer::start();
    seed::seed(&source);
    let expected = seed::checksums(&source);

    let backup = db_agent(
        &store,
        &source,
        &format!("backup --compression {compression} --backup-id first"),
    );
    let details = run_ok(backup);
    assert_eq!(details["backupId"], "first");

    let keys = store.keys("nightly/tests/db/first/").await;
    assert!(
        keys.contains(&"nightly/tests/db/first/manifest.json".to_string()),
        "{keys:?}"
    );

    let listed = run_ok({
        let mut c = agent(&store, "db", None);
        c.arg("list");
        c
    });
    assert_eq!(listed["backups"][0]["backupId"], "first");
    run_ok({
        let mut c = agent(&store, "db", None);
        c.arg("verify");
        c
    });

    // The target already has the app owner with its own password (as the operator creates it).
    let target = PgServer::start();
    target.psql(
        "postgres",
        "CREATE ROLE app_owner LOGIN PASSWORD 'target-pw'",
    );
    let hash = "SELECT rolpassword FROM pg_authid WHERE rolname = 'app_owner'";
    let target_hash = target.psql("postgres", hash);
    let restore = db_agent(
        &store,
        &target,
        "restore --backup-id latest --preserve-role app_owner",
    );
    run_ok(restore);
    assert_eq!(seed::checksums(&target), expected);
    assert_eq!(
        target.psql("postgres", hash),
        target_hash,
        "preserved role's password changed"
    );
    assert_eq!(
        target.psql(
            "postgres",
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = 'app_owner'"
        ),
        "t"
    );
    assert_eq!(
        target.psql(
            "postgres",
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'app'"
        ),
        "app_owner"
    );
    assert_eq!(
        target.psql(
            "app",
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'orders_customer_idx'"
        ),
        "1"
    );
    assert_eq!(
        target.psql("app", "SELECT count(*) FROM big_orders"),
        source.psql("app", "SELECT count(*) FROM big_orders")
    );

    // A second restore into the now non-empty target is refused without --force.
    let again = db_agent(&store, &target, "restore --backup-id first");
    run_fails(again, 6, "not empty");
    let forced = db_agent(&store, &target, "restore --backup-id first --force");
    run_ok(forced);
    assert_eq!(seed::checksums(&target), expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn round_trip_minio_zstd() {
    round_trip(Kind::Minio, "zstd").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn round_trip_gcs_gzip() {
    round_trip(Kind::Gcs, "gzip").await;
}

/// The agent starts before the database (a Job racing a restarting pod): it retries, then works.
#[tokio::test(flavor = "multi_thread")]
async fn backup_waits_for_a_starting_database() {
    let store = TestStore::start(Kind::Minio).await;
    let port = common::free_port();
    let mut cmd = agent(&store, "db", None);
    cmd.env("PGHOST", "127.0.0.1")
        .env("PGPORT", port.to_string())
        .env("PGUSER", "postgres")
        .env("PGPASSWORD", common::postgres::PASSWORD)
        .env("TUSK_CONNECT_TIMEOUT", "90s")
        .args(["backup", "--backup-id", "late"]);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _pg = PgServer::start_on(port);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("database not ready, retrying"), "{stderr}");
    common::agent::assert_no_secrets(&stderr);
    assert_eq!(summary(&out)["details"]["backupId"], "late");
}

/// A dump several parts long (8 MiB parts/chunks), uncompressed so the size is predictable:
/// exercises multipart completion on S3 and chunked resumable uploads on GCS.
async fn multi_part_round_trip(kind: Kind) {
    let store = TestStore::start(kind).await;
    let source = PgServer::start();
    seed::big_database(&source, "md5(i::text) || md5((i * 7)::text)", 400_000);
    let sum = "SELECT md5(string_agg(payload, '' ORDER BY i)) FROM filler";
    let expected = source.psql("big", sum);
    let uncompressed = "backup --compression none --database big --backup-id parts";
    run_ok(db_agent(&store, &source, uncompressed));
    let objects = store.store.list("nightly/tests/db/parts/").await.unwrap();
    let dump = objects
        .iter()
        .find(|o| o.key.ends_with("db-big.pgdump"))
        .expect("dump object");
    assert!(
        dump.size > 3 * 8 * 1024 * 1024,
        "only {} bytes: not multi-part",
        dump.size
    );

    let target = PgServer::start();
    let restore = db_agent(&store, &target, "restore --backup-id parts");
    run_ok(restore);
    assert_eq!(target.psql("big", sum), expected);
}

on_each_store!(multi_part_round_trip);
