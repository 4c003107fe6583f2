//! What the WAL archive loses when everything else is lost (issue 27, docs/src/design/pitr.md §2):
//! a writer commits a row every 100 ms on a server archiving with `archive_timeout = 5s`; the
//! server stops at once (no shutdown, no last archive) and its volume is given up; a base
//! backup and the archive restore to the end of the archive. The commits missing span about
//! the archive timeout plus one upload. The figure is printed; the assertions bound it at twice
//! the timeout and prove WAL was shipped by time while the writer ran (a segment at least
//! every timeout), not only when a 16 MiB segment fills.

mod common;

use std::time::Duration;

use common::agent::{agent, run_ok};
use common::archive::{agent_script, base_restored, recovered};
use common::postgres::PgServer;
use common::stores::{Kind, TestStore};

const ARCHIVE_TIMEOUT_SECONDS: f64 = 5.0;

#[tokio::test]
async fn losing_the_server_and_its_volume_loses_about_the_archive_timeout() {
    let store = TestStore::start(Kind::Minio).await;
    let source = PgServer::start();
    let push = agent_script(&source, &store, "wal-push");
    for setting in [
        "archive_mode = 'on'".to_owned(),
        format!("archive_command = '{} %p'", push.display()),
        format!("archive_timeout = '{ARCHIVE_TIMEOUT_SECONDS}s'"),
    ] {
        source.psql("postgres", &format!("ALTER SYSTEM SET {setting}"));
    }
    source.restart();
    source.psql(
        "postgres",
        "CREATE TABLE beat (id serial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())",
    );
    let mut backup = agent(&store, "db", Some(&source));
    backup.args(["base-backup", "--backup-id", "base1"]);
    run_ok(backup);

    // 15 s of commits, each acknowledged before the next; the last one's time is what a
    // client would have been told was durable.
    let mut last_acknowledged = 0.0_f64;
    let window = (jiff::Timestamp::now(), std::time::Instant::now());
    for _ in 0..150 {
        let at = source.psql(
            "postgres",
            "INSERT INTO beat DEFAULT VALUES RETURNING extract(epoch FROM at)",
        );
        last_acknowledged = at.parse().expect("an epoch");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written = source.psql("postgres", "SELECT count(*) FROM beat");
    source.crash();
    // What was archived while the writer ran: at least one segment per timeout, less one.
    let ended = jiff::Timestamp::now();
    let objects = store.store.list("").await.expect("list the bucket");
    let shipped = (objects.iter())
        .filter(|o| o.key.contains("/wal/"))
        .filter(|o| {
            let name = o.key.rsplit('/').next().unwrap_or_default();
            name.strip_suffix(".zst").is_some_and(|n| n.len() == 24)
        })
        .filter(|o| {
            o.last_modified
                .is_some_and(|at| at > window.0 && at <= ended)
        })
        .count();
    let seconds = window.1.elapsed().as_secs_f64();
    let expected = (seconds / ARCHIVE_TIMEOUT_SECONDS).floor() as usize - 1;
    assert!(
        shipped >= expected,
        "{shipped} segments archived in the {seconds:.0} s the writer ran, not one per \
         archive_timeout ({expected} at least)"
    );

    let target = tempfile::tempdir().unwrap();
    let (pgdata, _) = base_restored(&store, target.path(), "base1");
    let restored = recovered(&store, &source, &pgdata, "").await;
    let kept = restored.psql(
        "postgres",
        "SELECT count(*) || ' ' || coalesce(extract(epoch FROM max(at)), 0) FROM beat",
    );
    let (count, newest) = kept.split_once(' ').expect("count and time");
    let lost = last_acknowledged - newest.parse::<f64>().expect("an epoch");
    eprintln!(
        "RPO: {lost:.1} s of commits lost ({count} of {written} rows restored), \
         archive_timeout {ARCHIVE_TIMEOUT_SECONDS} s"
    );
    assert!(count.parse::<u32>().unwrap_or(0) > 0, "nothing restored");
    assert!(
        lost < ARCHIVE_TIMEOUT_SECONDS * 2.0,
        "{lost:.1} s lost: WAL is not shipped every archive_timeout"
    );
}
