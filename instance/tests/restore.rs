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
    let copy = dir.join("bin/backup-agent");
    std::fs::copy(&built, &copy).expect("copy backup-agent");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
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

#[test]
fn a_new_cluster_restores_a_base_backup_to_a_point_in_time() {
    let bucket = Bucket::start();
    let mut source = Cluster::new(&["demo-0"]);
    archive_through_managers(&mut source, &bucket);
    source.set_lease("demo-0", true);
    source.member("demo-0").start();
    let primary = &source.members[0];
    primary.wait_ready_as("primary", Duration::from_secs(90));
    let agent = agent_in(source.dir.path());
    primary
        .psql("CREATE TABLE ledger (id int PRIMARY KEY); INSERT INTO ledger SELECT generate_series(1, 100)")
        .expect("first rows");
    base_backup(&agent, &source, &bucket, "base1");

    primary
        .psql("INSERT INTO ledger SELECT generate_series(101, 250)")
        .expect("rows after the backup");
    let target = primary
        .psql("SELECT clock_timestamp()")
        .expect("the target");
    primary
        .psql("INSERT INTO ledger SELECT generate_series(251, 300)")
        .expect("rows after the target");
    primary.psql("DROP TABLE ledger").expect("the mistake");
    let system = primary
        .psql("SELECT system_identifier FROM pg_control_system()")
        .expect("system identifier");
    let last = primary
        .psql("SELECT pg_walfile_name(pg_switch_wal())")
        .expect("switch");
    let key = format!("tests/demo/wal/{system}/00000001/{last}.zst");
    wait_for("the last segment archived", Duration::from_secs(60), || {
        bucket.keys("tests/demo/wal/").contains(&key)
    });

    let mut restored = Cluster::new(&["restored-0"]);
    let agent = agent_in(restored.dir.path());
    let member = restored.member("restored-0");
    member.set_env("TUSK_RESTORE_BACKUP_ID", Some("base1"));
    member.set_env("TUSK_RESTORE_TARGET_TIME", Some(&target));
    member.set_env("TUSK_AGENT_BINARY", Some(&agent.display().to_string()));
    for (name, value) in minio::store_env(&bucket.server, "tusk-archive") {
        member.set_env(&format!("RESTORE_{name}"), Some(&value));
    }
    member.set_env("RESTORE_TUSK_NAMESPACE", Some("tests"));
    member.set_env("RESTORE_TUSK_CLUSTER", Some("demo"));
    member.set_env("POSTGRES_PASSWORD", Some("the new cluster's own"));
    restored.set_lease("restored-0", true);
    let member = restored.member("restored-0");
    member.start();
    member.wait_ready_as("primary", Duration::from_secs(180));

    let rows = member
        .psql_as(
            "postgres",
            "the new cluster's own",
            "postgres",
            "SELECT count(*) || ' ' || max(id) FROM ledger",
        )
        .expect("the restored table, with this cluster's superuser password");
    assert_eq!(rows, "250 250", "every row before the target, none after");
    let restored_system = member
        .psql_as(
            "postgres",
            "the new cluster's own",
            "postgres",
            "SELECT system_identifier FROM pg_control_system()",
        )
        .expect("system identifier");
    assert_eq!(
        restored_system, system,
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
