//! A point-in-time restore by the instance manager (issue 27) on real servers and a real MinIO:
//! a new cluster's first holder, given a base backup and a target time instead of nothing to
//! initdb, unpacks the backup, recovers through `tusk-instance wal-fetch` (the manager runs the
//! backup agent with the source's credentials; PostgreSQL never sees them), promotes at the
//! target, takes this cluster's passwords, and serves: every row committed before the target
//! is there, none after, and the table dropped after it exists.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use backup_store::store::ObjectStore;
use common::bucket::{Bucket, archive_through_managers};
use common::*;
use tusk_testkit::minio;

/// The backup agent, built beside this package's binary, copied where the managers (the
/// postgres user) may run it.
fn agent_in(dir: &Path) -> PathBuf {
    let built = Path::new(env!("CARGO_BIN_EXE_tusk-instance")).with_file_name("backup-agent");
    if !built.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "backup-agent", "--bin", "backup-agent"])
            .status()
            .expect("cargo build");
        assert!(status.success(), "building backup-agent");
    }
    // As the init container does: the manager installed again, the agent beside it.
    let manager = dir.join("bin/tusk-instance");
    let out = Command::new(env!("CARGO_BIN_EXE_tusk-instance"))
        .arg("install")
        .arg(&manager)
        .arg("--with")
        .arg(&built)
        .output()
        .expect("tusk-instance install --with");
    assert!(
        out.status.success(),
        "install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let copy = dir.join("bin/backup-agent");
    let mode = std::fs::metadata(&copy)
        .expect("installed agent")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    copy
}

/// `backup-agent base-backup` of `primary` as the replication role with its certificate, as
/// the operator's Job runs it.
fn base_backup(agent: &Path, source: &Cluster, bucket: &Bucket, id: &str) {
    let tls = source.dir.path().join("tls");
    // libpq takes a key only from its owner (or root) with no access for others.
    let key = tempfile::NamedTempFile::new().expect("key file");
    std::fs::copy(tls.join("replication.key"), key.path()).expect("copy key");
    std::fs::set_permissions(key.path(), std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let primary = &source.members[0];
    let out = Command::new(agent)
        .args([
            "base-backup",
            "--backup-id",
            id,
            "--wal-wait-seconds",
            "120",
        ])
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", pg_bin_dir().display()))
        .envs(minio::store_env(&bucket.server, "tusk-archive"))
        .env("TUSK_NAMESPACE", "tests")
        .env("TUSK_CLUSTER", "demo")
        .env("PGHOST", "127.0.0.1")
        .env("PGPORT", primary.port.to_string())
        .env("PGUSER", "tusk_replication")
        .env("PGPASSWORD", REPLICATION_PASSWORD)
        .env("PGSSLMODE", "verify-full")
        .env("PGSSLROOTCERT", tls.join("ca.crt"))
        .env("PGSSLCERT", tls.join("replication.crt"))
        .env("PGSSLKEY", key.path())
        .output()
        .expect("run backup-agent");
    assert!(
        out.status.success(),
        "base-backup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A source cluster's history in the bucket: a base backup after 100 rows, 150 more rows in
/// their own segment (`middle`), the target time, 50 rows after it, a second base backup, then
/// the table dropped.
struct History {
    _source: Cluster,
    target: String,
    system: String,
    middle: String,
}

fn key_of(system: &str, segment: &str) -> String {
    format!("tests/demo/wal/{system}/00000001/{segment}.zst")
}

fn archived_history(bucket: &Bucket) -> History {
    let mut source = Cluster::new(&["demo-0"]);
    archive_through_managers(&mut source, bucket);
    source.set_lease("demo-0", true);
    source.member("demo-0").start();
    let primary = &source.members[0];
    primary.wait_ready_as("primary", Duration::from_secs(90));
    let agent = agent_in(source.dir.path());
    let sql = |what: &str, sql: &str| primary.psql(sql).unwrap_or_else(|e| panic!("{what}: {e}"));
    sql(
        "first rows",
        "CREATE TABLE ledger (id int PRIMARY KEY); INSERT INTO ledger SELECT generate_series(1, 100)",
    );
    base_backup(&agent, &source, bucket, "base1");
    sql("a fresh segment", "SELECT pg_switch_wal()");
    sql(
        "rows after the backup",
        "INSERT INTO ledger SELECT generate_series(101, 250)",
    );
    let middle = sql(
        "the middle segment",
        "SELECT pg_walfile_name(pg_switch_wal())",
    );
    let target = sql("the target", "SELECT clock_timestamp()");
    sql(
        "rows after the target",
        "INSERT INTO ledger SELECT generate_series(251, 300)",
    );
    // A newer base backup, after the target: a restore to the target must not start from it.
    base_backup(&agent, &source, bucket, "base2");
    sql("the mistake", "DROP TABLE ledger");
    let system = sql(
        "system identifier",
        "SELECT system_identifier FROM pg_control_system()",
    );
    let last = sql("switch", "SELECT pg_walfile_name(pg_switch_wal())");
    let key = key_of(&system, &last);
    wait_for("the last segment archived", Duration::from_secs(60), || {
        bucket.keys("tests/demo/wal/").contains(&key)
    });
    History {
        _source: source,
        target,
        system,
        middle,
    }
}

/// A new cluster's only member, set to restore the newest base backup of `tests/demo` that
/// can reach `target` (`latest`: `base1`, since `base2` completed after it).
fn restoring(bucket: &Bucket, target: &str) -> Cluster {
    let mut restored = Cluster::new(&["restored-0"]);
    let agent = agent_in(restored.dir.path());
    let member = restored.member("restored-0");
    member.set_env("TUSK_RESTORE_BACKUP_ID", Some("latest"));
    member.set_env("TUSK_RESTORE_TARGET_TIME", Some(target));
    member.set_env("TUSK_AGENT_BINARY", Some(&agent.display().to_string()));
    for (name, value) in minio::store_env(&bucket.server, "tusk-archive") {
        member.set_env(&format!("RESTORE_{name}"), Some(&value));
    }
    member.set_env("RESTORE_TUSK_NAMESPACE", Some("tests"));
    member.set_env("RESTORE_TUSK_CLUSTER", Some("demo"));
    member.set_env("POSTGRES_PASSWORD", Some(NEW_PASSWORD));
    restored.set_lease("restored-0", true);
    restored.member("restored-0").start();
    restored
}

const NEW_PASSWORD: &str = "the new cluster's own";

#[test]
fn a_new_cluster_restores_a_base_backup_to_a_point_in_time() {
    let bucket = Bucket::start();
    let history = archived_history(&bucket);
    let restored = restoring(&bucket, &history.target);
    let member = &restored.members[0];
    member.wait_ready_as("primary", Duration::from_secs(180));
    let sql = |sql: &str| member.psql_as("postgres", NEW_PASSWORD, "postgres", sql);
    let rows = sql("SELECT count(*) || ' ' || max(id) FROM ledger")
        .expect("the restored table, with this cluster's superuser password");
    assert_eq!(rows, "250 250", "every row before the target, none after");
    let restored_system = sql("SELECT system_identifier FROM pg_control_system()");
    assert_eq!(
        restored_system.as_deref(),
        Ok(history.system.as_str()),
        "the same database system, restored"
    );
    assert!(
        member.psql(";").is_err(),
        "the source's superuser password no longer logs in"
    );
    let data = &member.pgdata;
    let auto = std::fs::read_to_string(data.join("postgresql.auto.conf")).unwrap_or_default();
    assert!(
        !auto.contains("restore_command") && !auto.contains("recovery_target"),
        "the recovery settings are gone once promoted: {auto}"
    );
    assert!(!data.with_file_name("data.tusk-restore-pending").exists());
    let log = std::fs::read_to_string(&member.log).unwrap_or_default();
    assert!(
        !log.contains(minio::SECRET_KEY),
        "the source's secret is never logged"
    );
}

#[test]
fn a_segment_missing_before_the_target_stops_the_restore_and_nothing_is_promoted() {
    let bucket = Bucket::start();
    let history = archived_history(&bucket);
    let gone = key_of(&history.system, &history.middle);
    bucket
        .runtime
        .block_on(bucket.store.delete_many(std::slice::from_ref(&gone)))
        .expect("delete a segment");
    let restored = restoring(&bucket, &history.target);
    let member = &restored.members[0];
    wait_for("the restore to stop", Duration::from_secs(120), || {
        std::fs::read_to_string(&member.log)
            .unwrap_or_default()
            .contains("the recovery stopped")
    });
    let log = std::fs::read_to_string(&member.log).unwrap_or_default();
    assert!(
        log.contains("recovery ended before configured recovery target was reached"),
        "PostgreSQL names why: {log}"
    );
    assert_ne!(member.status_field("role"), "primary");
    assert!(
        member
            .pgdata
            .with_file_name("data.tusk-restore-pending")
            .exists(),
        "the restore is still pending, so the data is never started as it is"
    );
    assert!(
        member
            .psql_as("postgres", NEW_PASSWORD, "postgres", ";")
            .is_err(),
        "nothing serves"
    );
}
