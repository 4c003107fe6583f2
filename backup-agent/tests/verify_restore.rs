//! `verify-restore` against real PostgreSQL and MinIO: a good backup passes with the counts it
//! recorded, and each way a backup can be bad fails naming its check (exit 7), with the
//! scratch server removed every time.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use common::agent::{agent, run_ok};
use common::postgres::PgServer;
use common::seed;
use common::stores::{Kind, TestStore};
use common::verifier::{Verifier, check};

use backup_store::manifest::Manifest;
use backup_store::store::get_bytes;

/// Rows the seed puts in its five tables (2000 + 20000 + 500 + 365 + 2).
const SEED_ROWS: u64 = 22_867;

/// MinIO with the seeded cluster `db` backed up as `id` (extra backup flags in `flags`).
async fn backed_up(id: &str, flags: &[&str]) -> (TestStore, PgServer) {
    let store = TestStore::start(Kind::Minio).await;
    let source = PgServer::start();
    seed::seed(&source);
    let mut backup = agent(&store, "db", Some(&source));
    backup.args(["backup", "--backup-id", id]).args(flags);
    run_ok(backup);
    (store, source)
}

fn key(id: &str, file: &str) -> String {
    format!("nightly/tests/db/{id}/{file}")
}

async fn manifest(store: &TestStore, id: &str) -> Manifest {
    let bytes = get_bytes(store.store.as_ref(), &key(id, "manifest.json"))
        .await
        .expect("manifest");
    Manifest::from_json(&bytes).expect("manifest JSON")
}

/// Asserts a `Failed` report naming `failed` (exit 7) with a message that `mentions`, the
/// same on stdout and in the termination message; returns the report.
fn assert_failed(
    verifier: &Verifier,
    store: &TestStore,
    id: &str,
    failed: &str,
    mentions: &str,
) -> serde_json::Value {
    let (code, report, terminated) = verifier.run(verifier.command(store, "db", id));
    assert_eq!(code, 7, "{report}");
    assert_eq!(report["phase"], "Failed", "{report}");
    assert_eq!(report["failedCheck"], failed, "{report}");
    assert_eq!(check(&report, failed)["result"], "failed");
    let message = check(&report, failed)["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains(mentions),
        "{mentions:?} not in {message:?}"
    );
    assert_eq!(terminated["failedCheck"], failed);
    assert_eq!(terminated["phase"], "Failed");
    report
}

#[tokio::test(flavor = "multi_thread")]
async fn a_good_backup_verifies_passed_with_its_recorded_counts() {
    let (store, source) = backed_up("good", &[]).await;
    // The counts were recorded in the dump's snapshot: exactly the seeded rows.
    let recorded = manifest(&store, "good").await;
    let app = recorded
        .files
        .iter()
        .find(|f| f.database.as_deref() == Some("app"))
        .expect("app's file");
    let tables: Vec<(&str, &str, u64)> = app
        .tables
        .as_deref()
        .expect("counts recorded")
        .iter()
        .map(|t| (t.schema.as_str(), t.name.as_str(), t.rows))
        .collect();
    assert_eq!(
        tables,
        [
            ("billing", "invoices", 500),
            ("public", "customers", 2000),
            ("public", "orders", 20000)
        ]
    );

    let verifier = Verifier::new();
    let (code, report, terminated) = verifier.run(verifier.command(&store, "db", "latest"));
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["phase"], "Passed", "{report}");
    assert_eq!(report["backupId"], "good");
    for name in ["checksums", "restore", "databases", "amcheck", "counts"] {
        assert_eq!(check(&report, name)["result"], "passed", "{name}: {report}");
    }
    assert_eq!(report["tables"], 5);
    assert_eq!(report["rows"], SEED_ROWS);
    // postgres, app, reports and "odd name's db".
    assert_eq!(report["databases"], 4);
    assert!(report.get("failedCheck").is_none());
    assert_eq!(terminated, report, "the operator reads what stdout says");
    // The source was never touched: no amcheck extension was installed there.
    assert_eq!(
        source.psql(
            "app",
            "SELECT count(*) FROM pg_extension WHERE extname = 'amcheck'"
        ),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn counts_not_recorded_are_reported_as_such_not_passed() {
    let (store, _source) = backed_up("uncounted", &["--record-counts=false"]).await;
    let recorded = manifest(&store, "uncounted").await;
    assert!(recorded.files.iter().all(|f| f.tables.is_none()));
    let verifier = Verifier::new();
    let (code, report, _) = verifier.run(verifier.command(&store, "db", "uncounted"));
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["phase"], "Passed");
    let counts = check(&report, "counts");
    assert_eq!(counts["result"], "skipped");
    let message = counts["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("not recorded"), "{counts}");
    // What was restored is still counted.
    assert_eq!(report["rows"], SEED_ROWS);
}

/// A dump altered in the bucket (one flipped byte): the checksum check fails and nothing is
/// restored.
#[tokio::test(flavor = "multi_thread")]
async fn an_altered_dump_fails_the_checksums_check() {
    let (store, _source) = backed_up("altered", &[]).await;
    let dump = key("altered", "db-app.pgdump.zst");
    let mut bytes = get_bytes(store.store.as_ref(), &dump).await.unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    store.store.put(&dump, Bytes::from(bytes)).await.unwrap();

    let verifier = Verifier::new();
    let report = assert_failed(&verifier, &store, "altered", "checksums", "sha256");
    assert_eq!(check(&report, "restore")["result"], "skipped");
}

/// A backup whose manifest lists a database whose dump is gone from the bucket (deleted by
/// hand or by a bucket lifecycle rule that matched only some keys): the databases check fails
/// before anything is downloaded.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_database_dump_fails_the_databases_check() {
    let (store, _source) = backed_up("partial", &[]).await;
    store
        .store
        .delete_many(&[key("partial", "db-reports.pgdump.zst")])
        .await
        .unwrap();

    let verifier = Verifier::new();
    assert_failed(&verifier, &store, "partial", "databases", "\"reports\"");
}

/// A backup that restores cleanly but holds other rows than it recorded (here the manifest's
/// count for one table is rewritten; every file's checksum stays valid): the counts check fails
/// naming the table, every other check passes.
#[tokio::test(flavor = "multi_thread")]
async fn counts_differing_from_the_manifest_fail_the_counts_check() {
    let (store, _source) = backed_up("miscounted", &[]).await;
    let mut recorded = manifest(&store, "miscounted").await;
    let orders = recorded
        .files
        .iter_mut()
        .filter_map(|f| f.tables.as_mut())
        .flatten()
        .find(|t| t.name == "orders")
        .expect("orders recorded");
    orders.rows = 19_999;
    let json = recorded.to_json().unwrap();
    store
        .store
        .put(&key("miscounted", "manifest.json"), Bytes::from(json))
        .await
        .unwrap();

    let verifier = Verifier::new();
    let report = assert_failed(
        &verifier,
        &store,
        "miscounted",
        "counts",
        "app.public.orders: 20000 rows restored, 19999 recorded",
    );
    for name in ["checksums", "restore", "databases", "amcheck"] {
        assert_eq!(check(&report, name)["result"], "passed", "{name}: {report}");
    }
}

/// SIGTERM mid-verification (the Job's deadline, a deleted pod): the scratch server, which
/// listens on no TCP address, is stopped and its directory removed; the report says `Error`
/// (exit 1), never Passed or Failed. A lock the test holds in the scratch server keeps the
/// verification from finishing first.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_and_removes_the_scratch_server() {
    let (store, _source) = backed_up("interrupted", &[]).await;
    let verifier = Verifier::new();
    let mut cmd = verifier.command(&store, "db", "interrupted");
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the agent");
    let parent = verifier.scratch.path().to_path_buf();
    common::wait_until("the scratch server", Duration::from_secs(60), || {
        let parent = parent.clone();
        async move { scratch_client(&parent).await.is_some() }
    })
    .await;
    let (client, dir) = scratch_client(&parent).await.expect("scratch server");
    let listen = client
        .query_one("SHOW listen_addresses", &[])
        .await
        .unwrap();
    assert_eq!(
        listen.get::<_, String>(0),
        "",
        "the scratch server listens on TCP"
    );
    // Every new connection and catalog read of the agent waits behind this lock.
    client
        .batch_execute("BEGIN; LOCK TABLE pg_database IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let pid_file = std::fs::read_to_string(dir.join("data/postmaster.pid")).unwrap();
    let postmaster = pid_file.lines().next().unwrap().trim().to_string();

    let agent_pid = agent_process(child.id());
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &agent_pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1));
    let summary = common::agent::summary(&out);
    assert_eq!(summary["details"]["phase"], "Error", "{summary}");
    assert_eq!(summary["error"], "interrupted by signal");
    let written = std::fs::read_to_string(verifier.termination_log()).unwrap();
    let terminated: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(terminated["phase"], "Error");
    verifier.assert_cleaned_up();
    // The postmaster is gone (at most a zombie until its parent's parent reaps it).
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{postmaster}/stat")) {
        let state = stat.rsplit(')').next().unwrap_or_default().trim_start();
        assert!(
            state.starts_with('Z'),
            "postmaster {postmaster} still runs: {stat}"
        );
    }
}

/// A superuser session in the scratch server under `parent`, through its socket.
async fn scratch_client(parent: &Path) -> Option<(tokio_postgres::Client, PathBuf)> {
    let dir = std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join(".s.PGSQL.5432").exists())?;
    let (client, connection) = tokio_postgres::Config::new()
        .host_path(&dir)
        .port(5432)
        .user("postgres")
        .dbname("postgres")
        .connect(tokio_postgres::NoTls)
        .await
        .ok()?;
    tokio::spawn(connection);
    Some((client, dir))
}

/// The agent's pid: `runuser`'s child when the tests run as root (signalling `runuser` would
/// make it SIGKILL the agent two seconds later), else the spawned process itself.
fn agent_process(spawned: u32) -> u32 {
    let children = format!("/proc/{spawned}/task/{spawned}/children");
    match std::fs::read_to_string(children) {
        Ok(list) if common::postgres::running_as_root() => list
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .expect("runuser's child"),
        _ => spawned,
    }
}
