//! `install` and the first start of the holder.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::*;

#[test]
fn install_copies_the_executable_with_mode_0755() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("tusk-instance");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tusk-instance"))
        .arg("install")
        .arg(&dest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        std::fs::read(env!("CARGO_BIN_EXE_tusk-instance")).unwrap()
    );
    // Only the destination is left: the temporary file was renamed onto it.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn primary_initdb_has_checksums_app_role_and_replication_role() {
    let mut cluster = single_primary();
    let primary = cluster.member("demo-0");

    assert_eq!(primary.psql("SHOW data_checksums").unwrap(), "on");
    assert_eq!(
        primary
            .psql_as(
                "app",
                APP_PASSWORD,
                "appdb",
                "SELECT current_user || '@' || current_database()"
            )
            .unwrap(),
        "app@appdb"
    );
    assert_eq!(
        primary
            .psql("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'appdb'")
            .unwrap(),
        "app"
    );
    assert_eq!(
        primary
            .psql("SELECT rolcanlogin AND rolreplication FROM pg_roles WHERE rolname = 'tusk_replication'")
            .unwrap(),
        "t"
    );
    // The replication role only replicates: an ordinary session is refused, as by the
    // operator's pg_hba.conf (its password streams in the replication tests).
    let refused = primary
        .psql_as(
            "tusk_replication",
            REPLICATION_PASSWORD,
            "postgres",
            "SELECT 1",
        )
        .unwrap_err();
    assert!(refused.contains("pg_hba.conf rejects"), "{refused}");
    // Every password the manager set went as a SCRAM verifier (the app's logged in above).
    assert_eq!(
        primary
            .psql(
                "SELECT bool_and(rolpassword LIKE 'SCRAM-SHA-256$4096:%') FROM pg_authid \
                 WHERE rolname IN ('postgres', 'app', 'tusk_replication', 'tusk_rewind', \
                 'tusk_backup')"
            )
            .unwrap(),
        "t"
    );
    assert!(
        primary
            .psql_as("app", "wrong", "appdb", "SELECT 1")
            .is_err()
    );
    let status = primary.status().unwrap();
    assert_eq!(status["timeline"], 1);
    assert_eq!(status["leaseHolder"], "demo-0");
    assert_eq!(
        common::http_get(primary.status_port, "/healthz").as_deref(),
        Some("ok")
    );
    assert_eq!(
        common::http_get(primary.status_port, "/readyz").as_deref(),
        Some("ready")
    );
}
