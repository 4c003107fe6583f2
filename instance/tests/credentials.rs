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

#[test]
fn no_server_process_inherits_a_password_and_the_managers_environment_is_roots() {
    let cluster = single_primary();
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
