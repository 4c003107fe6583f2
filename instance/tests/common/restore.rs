//! Restores for the tests: the backup agent installed where the managers may run it, a base
//! backup taken as the operator's Job takes it, and a new cluster's member set to restore.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tusk_testkit::minio;

use super::bucket::{Bucket, archive_through_managers};
use super::*;

/// The backup agent, built beside this package's binary, copied where the managers (the
/// postgres user) may run it.
pub fn agent_in(dir: &Path) -> PathBuf {
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

/// `backup-agent base-backup` of the primary (the first member) as the replication role with
/// its certificate, as the operator's Job runs it.
pub fn base_backup(agent: &Path, source: &Cluster, bucket: &Bucket, id: &str) {
    base_backup_from(agent, source, 0, bucket, id)
}

/// The same, read from member `from` (a replica: the operator's default when it has one).
pub fn base_backup_from(agent: &Path, source: &Cluster, from: usize, bucket: &Bucket, id: &str) {
    let tls = source.dir.path().join("tls");
    // libpq takes a key only from its owner (or root) with no access for others.
    let key = tempfile::NamedTempFile::new().expect("key file");
    std::fs::copy(tls.join("replication.key"), key.path()).expect("copy key");
    std::fs::set_permissions(key.path(), std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let member = &source.members[from];
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
        .envs(minio::store_env(&bucket.server, super::bucket::BUCKET))
        .env("TUSK_NAMESPACE", "tests")
        .env("TUSK_CLUSTER", "demo")
        .env("PGHOST", "127.0.0.1")
        .env("PGPORT", member.port.to_string())
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

/// A new cluster's only member, set to restore `backup` of `tests/demo` from `bucket` with
/// `target` (a `TUSK_RESTORE_TARGET_*` variable and its value; none: the end of the archive),
/// its superuser password `password`, and started.
pub fn restoring_member(
    bucket: &Bucket,
    backup: &str,
    target: Option<(&str, &str)>,
    password: &str,
) -> Cluster {
    let mut restored = Cluster::new(&["restored-0"]);
    set_to_restore(&mut restored, bucket, backup, target, password);
    restored.set_lease("restored-0", true);
    restored.member("restored-0").start();
    restored
}

/// Sets `cluster`'s first member to restore `backup` of `tests/demo` from `bucket` (see
/// [`restoring_member`]), not started.
pub fn set_to_restore(
    cluster: &mut Cluster,
    bucket: &Bucket,
    backup: &str,
    target: Option<(&str, &str)>,
    password: &str,
) {
    let agent = agent_in(cluster.dir.path());
    let member = &mut cluster.members[0];
    member.set_env("TUSK_RESTORE_BACKUP_ID", Some(backup));
    if let Some((name, value)) = target {
        member.set_env(name, Some(value));
    }
    member.set_env("TUSK_AGENT_BINARY", Some(&agent.display().to_string()));
    for (name, value) in minio::store_env(&bucket.server, super::bucket::BUCKET) {
        member.set_env(&format!("RESTORE_{name}"), Some(&value));
    }
    member.set_env("RESTORE_TUSK_NAMESPACE", Some("tests"));
    member.set_env("RESTORE_TUSK_CLUSTER", Some("demo"));
    member.set_env("POSTGRES_PASSWORD", Some(password));
}

/// One source system's life in `tests/demo`: a base backup `id` after a row `label`, a second
/// row after it, every segment archived; then the system is gone (stopped for good), as a
/// cluster deleted with its volumes. Returns its system identifier.
pub fn a_system_that_lived_and_died(bucket: &Bucket, id: &str, label: &str) -> String {
    let mut source = archiving_primary(bucket);
    let primary = &source.members[0];
    let sql = |sql: &str| primary.psql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    sql(&format!(
        "CREATE TABLE who (v text); INSERT INTO who VALUES ('{label}')"
    ));
    base_backup(&agent_in(source.dir.path()), &source, bucket, id);
    sql(&format!("INSERT INTO who VALUES ('{label} later')"));
    let system = sql("SELECT system_identifier FROM pg_control_system()");
    let last = sql("SELECT pg_walfile_name(pg_switch_wal())");
    let key = format!("tests/demo/wal/{system}/00000001/{last}.zst");
    wait_for("the last segment archived", Duration::from_secs(60), || {
        bucket.keys("tests/demo/wal/").contains(&key)
    });
    source.member("demo-0").stop();
    system
}

/// `tests/demo`'s only member archiving into `bucket`, holding the Lease and serving.
pub fn archiving_primary(bucket: &Bucket) -> Cluster {
    let mut source = Cluster::new(&["demo-0"]);
    archive_through_managers(&mut source, bucket);
    source.set_lease("demo-0", true);
    source.member("demo-0").start();
    source.members[0].wait_ready_as("primary", Duration::from_secs(90));
    source
}
