//! The WAL archive against a real PostgreSQL and MinIO: `wal-push` as the server's
//! `archive_command`, `wal-fetch` as a restore's `restore_command`, and a point-in-time restore
//! from a base backup to a restore point taken before a table was dropped.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::agent::{agent, run, run_fails, run_ok};
use common::archive::{agent_script, archived, switch};
use common::postgres::PgServer;
use common::stores::{Kind, TestStore};
use common::wait_until;

#[tokio::test]
async fn archived_wal_restores_to_a_point_in_time_and_is_never_overwritten() {
    let store = TestStore::start(Kind::Minio).await;
    let source = PgServer::start();
    let push = agent_script(&source, &store, "wal-push");
    source.psql("postgres", "ALTER SYSTEM SET archive_mode = 'on'");
    source.psql(
        "postgres",
        &format!("ALTER SYSTEM SET archive_command = '{} %p'", push.display()),
    );
    source.restart();
    let system = source.psql(
        "postgres",
        "SELECT system_identifier FROM pg_control_system()",
    );

    // A base backup without WAL: the archive must hold every segment it needs.
    let base = source.dir.path().join("base");
    let out = source.run_bin(
        "pg_basebackup",
        &[
            "-D",
            base.to_str().unwrap(),
            "-X",
            "none",
            "--checkpoint=fast",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    source.psql(
        "postgres",
        "CREATE TABLE ledger (id int PRIMARY KEY, note text)",
    );
    source.psql(
        "postgres",
        "INSERT INTO ledger SELECT g, 'row ' || g FROM generate_series(1, 1000) g",
    );
    source.psql("postgres", "SELECT pg_create_restore_point('before-drop')");
    source.psql("postgres", "DROP TABLE ledger");
    let last = switch(&source);
    archived(&source, &last).await;

    let keys = store.keys(&format!("nightly/tests/db/wal/{system}/")).await;
    assert!(
        keys.contains(&format!(
            "nightly/tests/db/wal/{system}/00000001/{last}.zst"
        )),
        "{keys:?}"
    );

    // The same bytes again succeed; other bytes under the name are refused, and kept out.
    let segment = source.dir.path().join("data/pg_wal").join(&last);
    let again = run_ok(pushed(&store, &source, &segment));
    assert_eq!(again["alreadyArchived"], true);
    let forged_dir = tempfile::tempdir().unwrap();
    let forged = forged_dir.path().join(&last);
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&forged, &bytes).unwrap();
    run_fails(pushed(&store, &source, &forged), 5, "different contents");

    // Fetched back byte for byte; a file the archive lacks is "not there" (1); a store that
    // does not answer stops recovery (126) rather than ending it early.
    let fetched = forged_dir.path().join("fetched");
    run_ok(fetched_to(&store, &source, &last, &fetched));
    assert_eq!(
        std::fs::read(&fetched).unwrap(),
        std::fs::read(&segment).unwrap()
    );
    let missing = fetched_to(&store, &source, "0000000100000000000000FF", &fetched);
    run_fails(missing, 1, "not in the archive");
    let mut unreachable = fetched_to(&store, &source, &last, &fetched);
    unreachable.env(
        "TUSK_S3_ENDPOINT",
        format!("http://127.0.0.1:{}", common::free_port()),
    );
    assert_eq!(run(unreachable).status.code(), Some(126));

    // A new server from the base backup replays the archive to the restore point: the table
    // and its rows are back.
    let fetch = agent_script(&source, &store, "wal-fetch");
    let settings = format!(
        "archive_mode = 'off'\nrestore_command = '{} %f %p'\n\
         recovery_target_name = 'before-drop'\nrecovery_target_action = 'promote'\n",
        fetch.display()
    );
    let restored = PgServer::start_recovering(&base, &settings);
    wait_until("recovery done", Duration::from_secs(60), || async {
        restored.psql("postgres", "SELECT pg_is_in_recovery()") == "f"
    })
    .await;
    assert_eq!(
        restored.psql("postgres", "SELECT count(*) FROM ledger"),
        "1000"
    );
    assert_eq!(
        restored.psql(
            "postgres",
            "SELECT system_identifier FROM pg_control_system()"
        ),
        system
    );
}

/// `wal-push` of `file` for `pg`'s system, run as the tests run the agent.
fn pushed(store: &TestStore, pg: &PgServer, file: &Path) -> Command {
    let mut cmd = agent(store, "db", None);
    cmd.arg("wal-push")
        .arg("--pgdata")
        .arg(pg.dir.path().join("data"))
        .arg(file);
    cmd
}

/// `wal-fetch` of `name` into `destination`, for `pg`'s system.
fn fetched_to(store: &TestStore, pg: &PgServer, name: &str, destination: &Path) -> Command {
    let mut cmd = agent(store, "db", None);
    cmd.arg("wal-fetch")
        .arg("--pgdata")
        .arg(pg.dir.path().join("data"))
        .arg(name)
        .arg(destination);
    cmd
}
