//! `verify-restore` of a physical backup against real PostgreSQL and MinIO (issue 28): the base
//! backup is restored, the archive replayed to its end in a throwaway server, and the result
//! checked. A good backup passes; with the primary's restore point, recovery stops there and
//! the counts recorded at it are compared. A damaged base backup fails `checksums`; a segment
//! missing from the archive fails `wal`, naming it; a changed count fails `counts`, naming the
//! table. The scratch server is removed every time.

mod common;

use bytes::Bytes;
use common::agent::{agent, run_ok};
use common::archive::{archived, archiving_server, switch};
use common::postgres::PgServer;
use common::stores::{Kind, TestStore};
use common::verifier::{Verifier, check};

use backup_store::store::get_bytes;

/// A server archiving into MinIO, a base backup `base1` of it between two batches of rows, and
/// the segments closed after the backup (all archived).
async fn backed_up() -> (TestStore, PgServer, Vec<String>) {
    let store = TestStore::start(Kind::Minio).await;
    let source = archiving_server(&store);
    source.psql(
        "postgres",
        "CREATE TABLE ledger (id int PRIMARY KEY); \
         INSERT INTO ledger SELECT generate_series(1, 1000)",
    );
    let mut backup = agent(&store, "db", Some(&source));
    backup.args(["base-backup", "--backup-id", "base1"]);
    run_ok(backup);
    let mut after = Vec::new();
    for batch in 0..3 {
        let rows = format!(
            "INSERT INTO ledger SELECT generate_series({}, {})",
            1001 + batch * 1000,
            2000 + batch * 1000
        );
        source.psql("postgres", &rows);
        after.push(switch(&source));
    }
    archived(&source, after.last().expect("a segment")).await;
    (store, source, after)
}

fn system(source: &PgServer) -> String {
    source.psql(
        "postgres",
        "SELECT system_identifier FROM pg_control_system()",
    )
}

#[tokio::test]
async fn a_physical_backup_restores_replays_the_whole_archive_and_passes() {
    let (store, _source, after) = backed_up().await;
    let verifier = Verifier::new();
    let mut command = verifier.command(&store, "db", "base1");
    // As in the Job's pod: the stock postgres image sets PGDATA to its own data directory,
    // which the scratch server is not (the restore command once followed it and failed).
    command.env("PGDATA", "/var/lib/postgresql/data");
    let (code, report, terminated) = verifier.run(command);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["phase"], "Passed", "{report}");
    assert_eq!(terminated["phase"], "Passed");
    for name in ["checksums", "restore", "wal", "databases", "amcheck"] {
        assert_eq!(check(&report, name)["result"], "passed", "{name}: {report}");
    }
    let wal = check(&report, "wal")["message"]
        .as_str()
        .unwrap_or_default();
    let last = after.last().expect("a segment");
    assert!(wal.contains(last.as_str()), "{wal}");
    // Every row, those written after the backup included: the replay reached the end.
    assert_eq!(report["rows"], 4000, "{report}");
    assert_eq!(check(&report, "counts")["result"], "skipped", "{report}");
}

#[tokio::test]
async fn a_damaged_base_backup_fails_the_checksums_check() {
    let (store, _source, _) = backed_up().await;
    let key = "nightly/tests/db/base1/base.tar.zst";
    let mut bytes = get_bytes(store.store.as_ref(), key).await.unwrap().to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    store.store.put(key, Bytes::from(bytes)).await.unwrap();
    let verifier = Verifier::new();
    let (code, report, _) = verifier.run(verifier.command(&store, "db", "base1"));
    assert_eq!(code, 7, "{report}");
    assert_eq!(report["failedCheck"], "checksums", "{report}");
    let message = check(&report, "checksums")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("base.tar.zst"), "{message}");
    assert_eq!(check(&report, "wal")["result"], "skipped", "{report}");
}

#[tokio::test]
async fn a_segment_missing_from_the_archive_fails_the_wal_check_naming_it() {
    let (store, source, after) = backed_up().await;
    let gone = &after[1];
    let key = format!(
        "nightly/tests/db/wal/{}/00000001/{gone}.zst",
        system(&source)
    );
    store
        .store
        .delete_many(std::slice::from_ref(&key))
        .await
        .expect("delete a segment");
    let verifier = Verifier::new();
    let (code, report, terminated) = verifier.run(verifier.command(&store, "db", "base1"));
    assert_eq!(code, 7, "{report}");
    assert_eq!(report["failedCheck"], "wal", "{report}");
    assert_eq!(terminated["failedCheck"], "wal");
    let message = check(&report, "wal")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains(gone.as_str()), "{message}");
}

#[tokio::test]
async fn recovery_stops_at_the_primarys_restore_point_and_a_changed_count_fails() {
    let (store, source, _) = backed_up().await;
    let mut point = agent(&store, "db", Some(&source));
    point.arg("restore-point");
    let written = run_ok(point);
    let name = written["name"].as_str().expect("a point name").to_owned();
    // After the point: rows the recovery must not reach.
    source.psql(
        "postgres",
        "INSERT INTO ledger SELECT generate_series(4001, 5000)",
    );
    let last = switch(&source);
    archived(&source, &last).await;

    let verifier = Verifier::new();
    let (code, report, _) = verifier.run(verifier.command(&store, "db", "base1"));
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["rows"], 4000, "stopped at the point: {report}");
    let counts = check(&report, "counts");
    assert_eq!(counts["result"], "passed", "{report}");
    assert!(
        counts["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&name),
        "{counts}"
    );
    let wal = check(&report, "wal")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(wal.contains(&name), "{wal}");

    // The record says one row more than the point holds: the counts check names the table.
    let key = written["key"].as_str().expect("the point's key");
    let bytes = get_bytes(store.store.as_ref(), key).await.unwrap();
    let mut recorded: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let ledger = recorded["databases"]["postgres"]
        .as_array_mut()
        .and_then(|tables| tables.iter_mut().find(|t| t["name"] == "ledger"))
        .expect("ledger counted at the point");
    assert_eq!(ledger["rows"], 4000);
    ledger["rows"] = 4001.into();
    let changed = serde_json::to_vec(&recorded).unwrap();
    store.store.put(key, Bytes::from(changed)).await.unwrap();
    let (code, report, _) = verifier.run(verifier.command(&store, "db", "base1"));
    assert_eq!(code, 7, "{report}");
    assert_eq!(report["failedCheck"], "counts", "{report}");
    let message = check(&report, "counts")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("postgres.public.ledger: 4000 rows restored, 4001 recorded"),
        "{message}"
    );
}

/// The cost of verifying a physical backup against the database's size (issue 28): for each
/// pgbench scale in `TUSK_BENCH_VERIFY_SCALES` (default 35 and 70, about 0.5 and 1 GiB), a base
/// backup, 64 MiB of WAL after it, the restore point, and `verify-restore`, timed. Printed by
/// `scripts/bench-verify.sh`; not a timed test.
#[tokio::test]
#[ignore = "a benchmark: scripts/bench-verify.sh"]
async fn verification_cost_by_database_size() {
    let scales = std::env::var("TUSK_BENCH_VERIFY_SCALES").unwrap_or_else(|_| "35,70".into());
    for scale in scales.split(',').map(str::trim) {
        let store = TestStore::start(Kind::Minio).await;
        let source = archiving_server(&store);
        let init = source.run_bin("pgbench", &["-i", "-q", "-s", scale, "postgres"]);
        assert!(
            init.status.success(),
            "{}",
            String::from_utf8_lossy(&init.stderr)
        );
        let size = source.psql("postgres", "SELECT pg_database_size('postgres') / 1048576");
        let mut backup = agent(&store, "db", Some(&source));
        backup.args(["base-backup", "--backup-id", "base1"]);
        let base = run_ok(backup);
        for _ in 0..4 {
            let load = source.run_bin("pgbench", &["-n", "-t", "2000", "-c", "2", "postgres"]);
            assert!(
                load.status.success(),
                "{}",
                String::from_utf8_lossy(&load.stderr)
            );
            switch(&source);
        }
        let mut point = agent(&store, "db", Some(&source));
        point.arg("restore-point");
        let started = std::time::Instant::now();
        let written = run_ok(point);
        let point_seconds = started.elapsed().as_secs_f64();
        let last = switch(&source);
        archived(&source, &last).await;
        let wal = source.psql(
            "postgres",
            &format!(
                "SELECT round(pg_wal_lsn_diff('{}', '{}') / 1048576)",
                written["lsn"].as_str().unwrap_or("0/0"),
                base["physical"]["startLsn"].as_str().unwrap_or("0/0")
            ),
        );
        let verifier = Verifier::new();
        let started = std::time::Instant::now();
        let (code, report, _) = verifier.run(verifier.command(&store, "db", "base1"));
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(code, 0, "{report}");
        let checks: Vec<String> = report["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{}={}",
                    c["name"].as_str().unwrap_or("?"),
                    c["result"].as_str().unwrap_or("?")
                )
            })
            .collect();
        eprintln!(
            "verification cost: pgbench scale {scale}, database {size} MiB, {} rows, WAL from the \
             backup to the point {wal} MiB: verify-restore {seconds:.1} s; restore point on the \
             primary {point_seconds:.1} s; {}",
            report["rows"],
            checks.join(" ")
        );
    }
}
