//! Switchover, the manager's half: asked through the Lease, the holder checkpoints, shuts down
//! fast and releases the Lease with its final LSN; the target, once handed the Lease, promotes
//! with every commit; an aborted switchover gives the old primary its role back.

mod common;

use std::time::Duration;

use common::*;

/// `X/Y` as a number, for comparing LSNs.
fn lsn(value: &serde_json::Value) -> u64 {
    let text = value.as_str().unwrap_or_default();
    let (high, low) = text.split_once('/').unwrap_or(("0", "0"));
    (u64::from_str_radix(high, 16).unwrap_or(0) << 32) | u64::from_str_radix(low, 16).unwrap_or(0)
}

/// Requests a switchover from demo-0 to demo-1 and waits for the release; the final LSN.
fn demote_demo_0(cluster: &Cluster) -> u64 {
    cluster.request_switchover("demo-0", "demo-1");
    wait_for(
        "demo-0 to release the Lease",
        Duration::from_secs(60),
        || {
            let lease = cluster.lease();
            lease["holder"] == "" && lease["finalLsn"].as_str().is_some_and(|l| !l.is_empty())
        },
    );
    let old = &cluster.members[0];
    assert!(old.postmaster_pid().is_none(), "released while running");
    assert_eq!(old.status_field("role"), "stopped");
    lsn(&cluster.lease()["finalLsn"])
}

#[test]
fn switchover_releases_the_final_lsn_and_the_target_promotes_with_every_commit() {
    let mut cluster = streaming_pair();
    let primary = &cluster.members[0];
    primary
        .psql(
            "CREATE TABLE before_switchover (v int); \
             INSERT INTO before_switchover SELECT generate_series(1, 1000)",
        )
        .unwrap();
    let final_lsn = demote_demo_0(&cluster);
    // The fast shutdown waited until the standby flushed the last WAL; it replays it next.
    let replica = &cluster.members[1];
    wait_for(
        "demo-1 to replay past the final LSN",
        Duration::from_secs(10),
        || {
            replica
                .status()
                .is_some_and(|s| lsn(&s["lsn"]["replayed"]) > final_lsn)
        },
    );

    // The operator's handover.
    cluster.set_lease("demo-1", true);
    let new = cluster.member("demo-1");
    new.wait_ready_as("primary", Duration::from_secs(60));
    assert_eq!(new.status_field("timeline"), 2);
    assert_eq!(
        new.psql("SELECT count(*) FROM before_switchover").unwrap(),
        "1000"
    );
    let old = &cluster.members[0];
    old.wait_ready_as("replica", Duration::from_secs(90));
    wait_for(
        "demo-0 streaming from demo-1",
        Duration::from_secs(30),
        || {
            old.status()
                .is_some_and(|s| s["walReceiver"] == "streaming" && s["timeline"] == 2)
        },
    );
    write_and_see_replicated(&cluster.members[1], &cluster.members[0], "after switchover");
}

#[test]
fn an_aborted_switchover_gives_the_old_primary_its_role_back() {
    let cluster = streaming_pair();
    demote_demo_0(&cluster);
    // The target never caught up (say): the operator gives the Lease back.
    cluster.set_lease("demo-0", true);
    let (old, replica) = (&cluster.members[0], &cluster.members[1]);
    old.wait_ready_as("primary", Duration::from_secs(60));
    assert_eq!(old.status_field("timeline"), 1);
    write_and_see_replicated(old, replica, "after the abort");
}
