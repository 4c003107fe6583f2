//! Self-fencing on a stale Lease, and restart in place after the postmaster is killed.

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn holder_that_cannot_renew_is_fenced_within_the_deadline() {
    let cluster = single_primary();

    let refused = Instant::now();
    cluster.set_lease("demo-0", false);
    let primary = &cluster.members[0];
    // Renew deadline: leaseDurationSeconds (6) - 2 = 4 s after the last good renew, which was
    // at most one renew interval before the refusals began; plus a tick of slack.
    wait_for("fenced", Duration::from_secs(6), || {
        primary.postmaster_pid().is_none() && primary.status_field("role") == "fenced"
    });
    eprintln!("fenced {:?} after renews began to fail", refused.elapsed());
    let status = primary.status().unwrap();
    assert_eq!(
        (&status["postgres"], &status["fenced"]),
        (&"stopped".into(), &true.into())
    );

    // No start as primary while renews keep failing...
    std::thread::sleep(Duration::from_secs(2));
    assert!(primary.postmaster_pid().is_none());
    // ...and back once a renew succeeds again.
    cluster.set_lease("demo-0", true);
    cluster.members[0].wait_ready_as("primary", Duration::from_secs(60));
}

#[test]
fn killed_postmaster_of_the_holder_is_restarted_in_place() {
    let mut cluster = single_primary();
    let primary = cluster.member("demo-0");
    primary.psql("CREATE TABLE w (n int)").unwrap();
    let pid = primary.postmaster_pid().expect("postmaster pid");

    unsafe { libc::kill(pid, libc::SIGKILL) };
    let gap = wait_for("a write after kill -9", Duration::from_secs(30), || {
        primary.psql("INSERT INTO w VALUES (1)").is_ok()
    });
    eprintln!("write gap after kill -9 of the postmaster: {gap:?}");
    // The killed postmaster's backends were orphans of the manager (PID 1 in the pod), which
    // reaped them.
    wait_for("no zombie children", Duration::from_secs(10), || {
        primary.zombie_children().is_empty()
    });
    let new_pid = primary.postmaster_pid().expect("restarted postmaster");
    assert_ne!(new_pid, pid);
    let status = primary.status().unwrap();
    assert_eq!(
        (&status["role"], &status["timeline"]),
        (&"primary".into(), &1.into())
    );
}

#[test]
fn sigterm_shuts_postgres_down_fast_and_exits_cleanly() {
    let mut cluster = single_primary();
    let primary = cluster.member("demo-0");
    let status = primary.terminate(Duration::from_secs(30));
    assert!(status.success(), "manager exit: {status}");
    assert!(primary.postmaster_pid().is_none());
    let log = std::fs::read_to_string(&primary.log).unwrap();
    assert!(log.contains("received fast shutdown request"), "{log}");
}
