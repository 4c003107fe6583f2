//! How fast a restore replays archived WAL (issue 27; `scripts/bench-restore.sh`): a backlog of
//! `TUSK_BENCH_WAL_MIB` MiB (default 1024) after a base backup, archived into a local MinIO,
//! restored into a new cluster to the end of the archive. Prints the time to unpack the base
//! backup and the replay rate (each WAL file fetched by its own agent process through the
//! manager, as PostgreSQL asks for it). Then the goal's reference: the same base backup and WAL
//! replayed by PostgreSQL alone from local files (`restore_command = 'cp …'`), both timed by
//! PostgreSQL's own "redo done … elapsed". Ignored: a benchmark, not a test.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use backup_store::ClusterLocation;
use backup_store::wal::{self, WalArchive, WalName};
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
    let Some(archive) = redo_elapsed(&log) else {
        return;
    };
    println!(
        "restore: PostgreSQL's redo took {archive:.1} s from the archive ({:.1} MiB/s)",
        wal_mib as f64 / archive
    );
    for local in [Local::Copied, Local::InPgWal] {
        if let Some(took) = local_replay(&agent, &bucket, &system, local) {
            println!(
                "restore: {took:.1} s {} ({:.1} MiB/s): the archive's replay is {:.0} % of \
                 this one's rate (goal >= 80 %)",
                local.describe(),
                wal_mib as f64 / took,
                100.0 * took / archive
            );
        }
    }
}

/// Where the reference replay finds the WAL.
#[derive(Clone, Copy)]
enum Local {
    /// In a local directory, `restore_command = 'cp …'`: an archive on local disk.
    Copied,
    /// Already in `pg_wal` (no restore command): the fastest replay there is.
    InPgWal,
}

impl Local {
    fn describe(self) -> &'static str {
        match self {
            Local::Copied => "from local files with restore_command = 'cp'",
            Local::InPgWal => "from WAL already in pg_wal",
        }
    }
}

/// PostgreSQL's own measure of a recovery: `redo done at … elapsed: 8.91 s`.
fn redo_elapsed(log: &str) -> Option<f64> {
    let line = log.lines().find(|l| l.contains("redo done at"))?;
    let elapsed = line.split("elapsed: ").nth(1)?;
    elapsed.split_whitespace().next()?.parse().ok()
}

/// Unpacks `base1` and every archived segment of `system` into local files (untimed), then lets
/// PostgreSQL replay them with `cp` as its `restore_command`, with the settings the managed
/// servers run with. PostgreSQL's redo time, in seconds.
fn local_replay(agent: &Path, bucket: &Bucket, system: &str, local: Local) -> Option<f64> {
    let scratch = tempfile::tempdir().expect("scratch");
    let data = scratch.path().join("data");
    let wal_dir = match local {
        Local::Copied => scratch.path().join("wal"),
        Local::InPgWal => data.join("pg_wal"),
    };
    let out = Command::new(agent)
        .args(["base-restore", "--backup-id", "base1", "--pgdata"])
        .arg(&data)
        .env("TUSK_PG_BIN_DIR", pg_bin_dir())
        .envs(tusk_testkit::minio::store_env(
            &bucket.server,
            common::bucket::BUCKET,
        ))
        .env("TUSK_NAMESPACE", "tests")
        .env("TUSK_CLUSTER", "demo")
        .output()
        .expect("base-restore");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::create_dir_all(&wal_dir).expect("wal dir");
    let location = ClusterLocation::new("", "tests", "demo").expect("location");
    let archive = WalArchive::new(&location, system.parse().expect("system identifier"));
    let folder = format!("tests/demo/wal/{system}/00000001/");
    for key in bucket.keys(&folder) {
        let Some(name) = key
            .strip_prefix(&folder)
            .and_then(|k| k.strip_suffix(".zst"))
        else {
            continue;
        };
        let file = WalName::parse(name).expect("a segment");
        let fetched = bucket
            .runtime
            .block_on(wal::fetch(&bucket.store, &archive, &file));
        let bytes = fetched.expect("fetch").expect("archived");
        std::fs::write(wal_dir.join(name), bytes).expect("write segment");
    }
    let port = tusk_testkit::free_port();
    let conf = scratch.path().join("postgresql.conf");
    let hba = scratch.path().join("pg_hba.conf");
    std::fs::write(&hba, "local all all trust\n").expect("hba");
    std::fs::write(
        &conf,
        format!(
            "port = {port}\nlisten_addresses = ''\nunix_socket_directories = '{dir}'\n\
             hba_file = '{hba}'\nfsync = off\nshared_buffers = 16MB\narchive_mode = off\n\
             ssl = off\n{restore}",
            dir = scratch.path().display(),
            hba = hba.display(),
            restore = match local {
                Local::Copied => format!("restore_command = 'cp {}/%f %p'\n", wal_dir.display()),
                Local::InPgWal => String::new(),
            }
        ),
    )
    .expect("conf");
    // With the WAL in pg_wal, the backup_label alone makes PostgreSQL replay it (crash
    // recovery from the backup's checkpoint), as a backup taken with -X stream starts.
    if let Local::Copied = local {
        std::fs::write(data.join("recovery.signal"), "").expect("recovery.signal");
    }
    // The manager's additions in the backup (TLS files, archive command) stay out: the
    // configuration is this one alone.
    let _ = std::fs::remove_file(data.join("postgresql.auto.conf"));
    if let Some((uid, gid)) = postgres_ids() {
        let status = Command::new("chown")
            .args(["-R", &format!("{uid}:{gid}")])
            .arg(scratch.path())
            .status()
            .expect("chown");
        assert!(status.success());
    }
    let log = scratch.path().join("postgres.log");
    let mut postgres = Command::new(pg_bin_dir().join("postgres"));
    postgres
        .arg("-D")
        .arg(&data)
        .arg("-c")
        .arg(format!("config_file={}", conf.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"));
    if let Some((uid, gid)) = postgres_ids() {
        use std::os::unix::process::CommandExt;
        postgres.uid(uid).gid(gid);
    }
    let mut server = postgres.spawn().expect("postgres");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for("local replay done", Duration::from_secs(3600), || {
        read().contains("redo done at") || read().contains("FATAL")
    });
    // A fast shutdown, so the server's shared memory goes with it.
    let pid = i32::try_from(server.id()).expect("pid");
    unsafe { libc::kill(pid, libc::SIGINT) };
    let _ = server.wait();
    let text = read();
    let elapsed = redo_elapsed(&text);
    if elapsed.is_none() {
        eprintln!("local replay failed:\n{text}");
    }
    elapsed
}
