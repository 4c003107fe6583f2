//! The archiver's throughput on a backlog (issue 27's goal, docs/src/design/pitr.md §9): WAL piles
//! up while archiving fails, then the manager's hook is put back and the backlog drains into
//! MinIO, with 1 upload at a time and with the default 4. And the archive's lag under the
//! fastest pgbench write load this machine sustains (goal: at most 2 segments waiting at p99).
//! Benchmarks, not tests: ignored, and run by `scripts/bench-archive.sh`, which prints the
//! figures.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bucket::{Bucket, archive_through_managers};
use common::*;

fn backlog_mib() -> u64 {
    std::env::var("TUSK_BENCH_WAL_MIB")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(1024)
}

/// Drains a backlog of about `backlog_mib()` of WAL with `parallel` uploads; MiB/s.
fn drain(bucket: &Bucket, parallel: usize) -> f64 {
    let mut cluster = Cluster::with_settings(&["demo-0"], "max_wal_size = '4GB'\n");
    archive_through_managers(&mut cluster, bucket);
    let member = cluster.member("demo-0");
    member.set_env("TUSK_ARCHIVE_PARALLEL", Some(&parallel.to_string()));
    member.set_env("TUSK_CLUSTER", Some(&format!("bench{parallel}")));
    cluster.set_lease("demo-0", true);
    let primary = cluster.member("demo-0");
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(90));
    let sql = |q: &str| primary.psql(q).expect(q);
    sql("ALTER SYSTEM SET archive_command = 'false'");
    sql("SELECT pg_reload_conf()");
    sql("CREATE TABLE junk (id bigint, pad text)");
    let start = sql("SELECT pg_current_wal_lsn()");
    let target = backlog_mib() << 20;
    loop {
        sql(
            "INSERT INTO junk SELECT g, md5(g::text) || md5(random()::text) \
             FROM generate_series(1, 200000) g",
        );
        let written: u64 = sql(&format!("SELECT pg_current_wal_lsn() - '{start}'"))
            .parse()
            .expect("bytes");
        if written >= target {
            break;
        }
    }
    sql("SELECT pg_switch_wal()");
    // A failed /status read is no figure: never taken for "nothing pending" (which would end
    // the drain early and inflate the rate).
    let pending = || {
        primary
            .status()
            .and_then(|s| s["archive"]["pending"].as_u64())
    };
    wait_for("a backlog", Duration::from_secs(60), || {
        pending().is_some_and(|p| p > 0)
    });
    let files = pending().expect("the backlog read from /status");
    sql("ALTER SYSTEM RESET archive_command");
    sql("SELECT pg_reload_conf()");
    let started = Instant::now();
    wait_for("the backlog archived", Duration::from_secs(1800), || {
        pending() == Some(0)
    });
    let seconds = started.elapsed().as_secs_f64();
    let mib = files as f64 * 16.0;
    let rate = mib / seconds;
    let peak = cluster.members[0]
        .manager_pid()
        .and_then(peak_rss_mib)
        .map_or_else(|| "unknown".to_owned(), |m| format!("{m} MiB"));
    println!(
        "archive backlog: {files} files ({mib:.0} MiB) in {seconds:.1} s = {rate:.0} MiB/s \
         with {parallel} upload(s) at once; the manager's peak RSS {peak}"
    );
    rate
}

/// A process's peak resident memory (VmHWM), in MiB: the archiver runs inside the manager, so
/// this is what archiving costs the pod beyond PostgreSQL.
fn peak_rss_mib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

#[test]
#[ignore = "a benchmark: scripts/bench-archive.sh"]
fn a_backlog_drains_faster_with_uploads_ahead_of_the_archiver() {
    let bucket = Bucket::start();
    let serial = drain(&bucket, 1);
    let ahead = drain(&bucket, 4);
    println!(
        "archive backlog: {:.1}x with 4 uploads at once",
        ahead / serial
    );
}

fn lag_seconds() -> u64 {
    std::env::var("TUSK_BENCH_LAG_SECONDS")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(60)
}

/// The `p`-th percentile of sorted `values`.
fn percentile(values: &[u64], p: f64) -> u64 {
    let rank = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(rank).copied().unwrap_or(0)
}

#[test]
#[ignore = "a benchmark: scripts/bench-archive.sh"]
fn archive_lag_under_a_sustained_pgbench_write_load() {
    let bucket = Bucket::start();
    // Checkpoints as the pod has them; WAL as pgbench writes it (full-page writes included).
    let mut cluster = Cluster::with_settings(&["demo-0"], "max_wal_size = '1GB'\n");
    archive_through_managers(&mut cluster, &bucket);
    cluster
        .member("demo-0")
        .set_env("TUSK_CLUSTER", Some("lag"));
    cluster.set_lease("demo-0", true);
    let primary = cluster.member("demo-0");
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(90));
    let pgbench = |args: &[&str]| {
        let mut cmd = Command::new(pg_bin_dir().join("pgbench"));
        cmd.args([
            "-h",
            "127.0.0.1",
            "-p",
            &primary.port.to_string(),
            "-U",
            "postgres",
        ])
        .args(args)
        .arg("postgres")
        .env("PGPASSWORD", SUPERUSER_PASSWORD)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        cmd
    };
    let init = pgbench(&["-i", "-s", "20", "-q"])
        .output()
        .expect("pgbench -i");
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let sql = |q: &str| primary.psql(q).expect(q);
    sql("SELECT pg_switch_wal()");
    let pending = || {
        primary
            .status()
            .and_then(|s| s["archive"]["pending"].as_u64())
    };
    wait_for(
        "the load's backlog archived",
        Duration::from_secs(300),
        || pending() == Some(0),
    );

    // The fastest write load: simple updates (no branch-table contention) and, one
    // transaction in ten, a bulk insert of 2,000 rows; commits do not wait for the disk
    // (synchronous_commit off), so WAL is made as fast as the CPU allows, for the whole run.
    let seconds = lag_seconds();
    let start = sql("SELECT pg_current_wal_lsn()");
    let scratch = tempfile::tempdir().expect("scratch");
    let bulk = scratch.path().join("bulk.sql");
    std::fs::write(
        &bulk,
        "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) \
         SELECT 1, 1, g, g, now() FROM generate_series(1, 2000) g;\n",
    )
    .expect("bulk script");
    let bulk = format!("{}@1", bulk.display());
    let duration = seconds.to_string();
    let args = [
        "-b",
        "simple-update@9",
        "-f",
        &bulk,
        "-c",
        "8",
        "-j",
        "2",
        "-T",
        &duration,
    ];
    let load = pgbench(&args)
        .env("PGOPTIONS", "-c synchronous_commit=off")
        .spawn()
        .expect("pgbench");
    let began = Instant::now();
    let (mut samples, mut unread) = (Vec::new(), 0usize);
    while began.elapsed() < Duration::from_secs(seconds) {
        match pending() {
            Some(p) => samples.push(p),
            None => unread += 1,
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // A benchmark that could not measure says so: most reads must have answered.
    assert!(
        samples.len() >= 4 * unread && !samples.is_empty(),
        "archive lag: {} of {} /status reads failed: no figure",
        unread,
        unread + samples.len()
    );
    let out = load.wait_with_output().expect("pgbench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: f64 = sql(&format!("SELECT pg_current_wal_lsn() - '{start}'"))
        .parse()
        .expect("bytes");
    let tps = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("tps"))
        .map(|l| l.split_whitespace().nth(2).unwrap_or("?").to_owned())
        .unwrap_or_else(|| "?".to_owned());
    samples.sort_unstable();
    let mib_s = written / f64::from(1 << 20) / seconds as f64;
    println!(
        "archive lag: pgbench (simple-update, 1 in 10 a 2,000-row insert, synchronous_commit \
         off, 8 clients) for {seconds} s, {tps} tps, WAL at {mib_s:.1} MiB/s; \
         files waiting for the archive over {} samples: p50 {} p99 {} max {} (goal: p99 <= 2)",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.last().copied().unwrap_or(0)
    );
}
