//! Passwords the operator hands the manager (environment variables filled from the cluster's
//! Secrets) stay with the manager: no server process inherits them, and the manager's own
//! `/proc/<pid>/environ` is root's, so nothing running as the postgres user — a backend, a
//! superuser's `pg_read_file('/proc/1/environ')` — reads them.

mod common;

use std::os::unix::fs::MetadataExt;

use common::*;

/// The environment of process `pid`, as root reads it; `None` once it has exited (a backend
/// whose session ended between the listing and the read).
fn environment(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(String::from_utf8_lossy(&raw).replace('\0', "\n"))
}

/// A GCS key as the operator now hands it to the manager (issue 47, defect 6): in the
/// environment, where it is as safe as the passwords.
const GCS_KEY: &str = r#"{"type":"service_account","private_key":"gcs-key-marker"}"#;

#[test]
fn no_server_process_inherits_a_password_and_the_managers_environment_is_roots() {
    let mut cluster = Cluster::new(&["demo-0"]);
    cluster.set_lease("demo-0", true);
    let member = cluster.member("demo-0");
    member.set_env("TUSK_GCS_KEY_JSON", Some(GCS_KEY));
    member.start();
    member.wait_ready_as("primary", std::time::Duration::from_secs(90));
    let member = &cluster.members[0];
    let postmaster = member.postmaster_pid().expect("postmaster");
    // A backend too: the postmaster passes its environment to each.
    member.psql("SELECT 1").expect("a session");
    let mut servers = vec![postmaster];
    let children =
        std::fs::read_to_string(format!("/proc/{postmaster}/task/{postmaster}/children"))
            .unwrap_or_default();
    servers.extend(
        children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok()),
    );
    assert!(
        servers.len() > 1,
        "the postmaster's children were not found"
    );
    // The postmaster and its long-lived children (checkpointer, writers, launchers) at least.
    let mut read = 0;
    for pid in servers {
        let Some(env) = environment(pid) else {
            continue;
        };
        read += 1;
        for password in [SUPERUSER_PASSWORD, APP_PASSWORD, REPLICATION_PASSWORD] {
            assert!(
                !env.contains(password),
                "process {pid} inherited a password"
            );
        }
        assert!(!env.contains("PASSWORD="), "process {pid}: {env}");
        assert!(
            !env.contains("gcs-key-marker"),
            "process {pid} inherited the GCS key"
        );
    }
    assert!(read > 1, "only {read} server process read");
    let manager = member.manager_pid().expect("manager");
    let owner = std::fs::metadata(format!("/proc/{manager}/environ"))
        .expect("the manager's environ")
        .uid();
    assert_eq!(
        owner, 0,
        "the postgres user can read the manager's passwords"
    );
}
