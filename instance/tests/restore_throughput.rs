//! How fast a restore replays archived WAL (issue 27; `scripts/bench-restore.sh`): a backlog of
//! `TUSK_BENCH_WAL_MIB` MiB (default 1024) after a base backup, archived into a local MinIO,
//! restored into a new cluster to the end of the archive. Prints the time to unpack the base
//! backup and the replay rate (each WAL file fetched by its own agent process through the
//! manager, as PostgreSQL asks for it). Ignored: a benchmark, not a test.

mod common;

use std::time::{Duration, Instant};

use common::bucket::{Bucket, archive_through_managers};
use common::restore::{agent_in, base_backup, restoring_member};
use common::*;

/// Seconds since midnight of a manager log line's timestamp (`2026-11-28T15:19:39.736370Z …`).
fn logged_at(line: &str) -> Option<f64> {
    let time = line.split_whitespace().next()?.split_once('T')?.1;
    let time = time.trim_end_matches('Z');
    let mut parts = time.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
}

fn when(log: &str, what: &str) -> f64 {
    log.lines()
        .filter(|l| l.contains(what))
        .find_map(logged_at)
        .unwrap_or_else(|| panic!("no {what:?} in the manager's log"))
}

#[test]
#[ignore = "a benchmark: scripts/bench-restore.sh"]
fn replay_rate_of_a_restore_from_the_archive() {
    let mib: i64 = std::env::var("TUSK_BENCH_WAL_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let bucket = Bucket::start();
    let mut source = Cluster::new(&["demo-0"]);
    archive_through_managers(&mut source, &bucket);
    source.set_lease("demo-0", true);
    source.member("demo-0").start();
    let primary = &source.members[0];
    primary.wait_ready_as("primary", Duration::from_secs(90));
    let agent = agent_in(source.dir.path());
    base_backup(&agent, &source, &bucket, "base1");
    let sql = |sql: &str| primary.psql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let start = sql("SELECT pg_current_wal_lsn()");
    sql("CREATE TABLE filler (v text)");
    let written = |start: &str| -> i64 {
        sql(&format!(
            "SELECT (pg_wal_lsn_diff(pg_current_wal_lsn(), '{start}') / 1048576)::bigint"
        ))
        .parse()
        .unwrap_or_default()
    };
    while written(&start) < mib {
        sql("INSERT INTO filler SELECT repeat(md5(g::text), 30) FROM generate_series(1, 50000) g");
    }
    let wal_mib = written(&start);
    let system = sql("SELECT system_identifier FROM pg_control_system()");
    let last = sql("SELECT pg_walfile_name(pg_switch_wal())");
    let key = format!("tests/demo/wal/{system}/00000001/{last}.zst");
    wait_for("the backlog archived", Duration::from_secs(1800), || {
        bucket.keys("tests/demo/wal/").contains(&key)
    });

    let started = Instant::now();
    let restored = restoring_member(&bucket, "base1", None, "bench-pw");
    let member = &restored.members[0];
    member.wait_ready_as("primary", Duration::from_secs(3600));
    let total = started.elapsed().as_secs_f64();
    let log = std::fs::read_to_string(&member.log).unwrap_or_default();
    let unpack =
        when(&log, "recovering from the archive") - when(&log, "unpacking the base backup");
    let replay = when(&log, "restore finished") - when(&log, "recovering from the archive");
    println!(
        "restore: base backup unpacked in {unpack:.1} s; {wal_mib} MiB of WAL replayed in \
         {replay:.1} s ({:.1} MiB/s); serving {total:.1} s after the start",
        wal_mib as f64 / replay
    );
}
