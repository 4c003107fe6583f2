//! Cloning, promotion on a Lease handover, and the old primary's rejoin.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn replica_clones_and_streams_from_the_holder() {
    let cluster = streaming_pair();
    let (primary, replica) = (&cluster.members[0], &cluster.members[1]);
    write_and_see_replicated(primary, replica, "from primary");

    let p = primary.status().unwrap();
    assert_eq!(
        (
            &p["pod"],
            &p["role"],
            &p["postgres"],
            &p["ready"],
            &p["fenced"]
        ),
        (
            &"demo-0".into(),
            &"primary".into(),
            &"running".into(),
            &true.into(),
            &false.into()
        )
    );
    assert_eq!(p["timeline"], 1);
    assert!(p["lsn"]["current"].is_string(), "{p}");
    let r = replica.status().unwrap();
    assert_eq!(
        (&r["role"], &r["leaseHolder"]),
        (&"replica".into(), &"demo-0".into())
    );
    assert_eq!(r["timeline"], 1);
    assert_eq!(r["walReceiver"], "streaming");
    assert!(r["lsn"]["current"].is_null(), "{r}");
    assert!(
        r["lsn"]["received"].is_string() && r["lsn"]["replayed"].is_string(),
        "{r}"
    );
    assert_eq!(r["systemIdentifier"], p["systemIdentifier"]);
    // The replica streams through its slot, kept by the primary.
    assert_eq!(
        primary
            .psql("SELECT slot_name || ':' || active FROM pg_replication_slots")
            .unwrap(),
        "tusk_demo_1:true"
    );
}

#[test]
fn handover_promotes_the_replica_after_the_old_primary_is_fenced() {
    let mut cluster = streaming_pair();
    fail_over(&mut cluster);
    let new = cluster.member("demo-1");
    new.psql("CREATE TABLE after_failover (v int); INSERT INTO after_failover VALUES (1)")
        .unwrap();
    assert_eq!(new.psql("SELECT pg_is_in_recovery()").unwrap(), "f");
}

#[test]
fn old_primary_rewinds_and_streams_from_the_new_primary() {
    let mut cluster = streaming_pair();
    cluster.members[0]
        .psql("CREATE TABLE t (v text); INSERT INTO t VALUES ('timeline 1')")
        .unwrap();
    fail_over(&mut cluster);
    let old = &cluster.members[0];
    old.wait_streaming_from("demo-1", Duration::from_secs(90));
    cluster.members[1]
        .psql("INSERT INTO t VALUES ('timeline 2')")
        .unwrap();
    wait_for_value(
        &cluster.members[0],
        "SELECT string_agg(v, ',' ORDER BY v) FROM t",
        "timeline 1,timeline 2",
        Duration::from_secs(30),
    );
    assert_eq!(cluster.members[0].status_field("timeline"), 2);
    // By a rewind, not a fresh clone (which would pass the checks above too): the rewind logs
    // in as tusk_rewind with the replication certificate, never as the superuser.
    let log = std::fs::read_to_string(&cluster.members[0].log).expect("demo-0's log");
    assert!(
        log.contains("pg_rewind done") && !log.contains("cloning with pg_basebackup"),
        "demo-0 rejoined without pg_rewind:\n{log}"
    );
}

#[test]
fn old_primary_is_cloned_again_when_pg_rewind_fails() {
    let mut cluster = streaming_pair();
    fence_demo_0(&mut cluster);
    let old = &cluster.members[0];
    // A control file pg_rewind cannot read: the rewind fails, the re-clone must not.
    std::fs::write(old.pgdata.join("global/pg_control"), b"").unwrap();
    cluster.set_lease("demo-1", true);
    cluster.members[1].wait_ready_as("primary", Duration::from_secs(60));
    let old = &cluster.members[0];
    write_and_see_replicated(&cluster.members[1], old, "after re-clone");
    // The report follows the server's facts, polled: under load a round can time out.
    wait_for("demo-0 reports streaming", Duration::from_secs(10), || {
        old.status_field("walReceiver") == "streaming"
    });
    let mut aside = old.pgdata.clone().into_os_string();
    aside.push(".old");
    assert!(std::path::Path::new(&aside).join("PG_VERSION").exists());
}

#[test]
fn other_replicas_follow_the_new_primary() {
    let mut cluster = Cluster::new(&["demo-0", "demo-1", "demo-2"]);
    start_streaming(&mut cluster);
    write_and_see_replicated(&cluster.members[0], &cluster.members[2], "timeline 1");
    fail_over(&mut cluster);
    // demo-2 is pointed at demo-1 by a reload, without a restart, and follows it to timeline 2.
    let third = &cluster.members[2];
    wait_for("demo-2 follows demo-1", Duration::from_secs(60), || {
        third.status().is_some_and(|s| {
            s["leaseHolder"] == "demo-1" && s["walReceiver"] == "streaming" && s["timeline"] == 2
        })
    });
    write_and_see_replicated(&cluster.members[1], third, "timeline 2");
    let upstream = cluster.members[1]
        .psql("SELECT application_name FROM pg_stat_replication WHERE application_name = 'demo-2'")
        .unwrap();
    assert_eq!(upstream, "demo-2");
}

/// A standby dials the holder's published IP, and follows it when it changes (a recreated
/// primary pod), without waiting for its connection or the pod's DNS name to time out.
#[test]
fn a_replica_dials_the_holders_published_address_and_follows_it() {
    let cluster = streaming_pair();
    let (primary, replica) = (&cluster.members[0], &cluster.members[1]);
    let receiver = "SELECT status || ' ' || (conninfo LIKE '%hostaddr=127.0.0.1 %')::text \
                    FROM pg_stat_wal_receiver";
    cluster.set_lease_at("demo-0", "127.0.0.1");
    wait_for_value(replica, receiver, "streaming true", Duration::from_secs(30));
    write_and_see_replicated(primary, replica, "dialled by IP");
    // Published somewhere nothing listens: the standby leaves the old address at once.
    cluster.set_lease_at("demo-0", "127.0.0.3");
    wait_for("demo-1 stops streaming", Duration::from_secs(30), || {
        replica.status_field("walReceiver") != "streaming"
    });
    cluster.set_lease_at("demo-0", "127.0.0.1");
    wait_for_value(replica, receiver, "streaming true", Duration::from_secs(30));
    write_and_see_replicated(primary, replica, "back at the first address");
}

/// With quorum commit configured (as `spec.replication.synchronous` does), the primary's first
/// start still completes (its bootstrap commits locally: no standby can exist yet), and once the
/// replica streams it confirms every commit.
#[test]
fn synchronous_replication_bootstraps_and_then_confirms_commits() {
    let sync = "synchronous_standby_names = 'ANY 1 (\"demo-0\", \"demo-1\")'\n";
    let cluster = streaming_pair_with(sync);
    let primary = &cluster.members[0];
    wait_for_value(
        primary,
        "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'demo-1'",
        "quorum",
        Duration::from_secs(30),
    );
    primary
        .psql("CREATE TABLE confirmed (v int); INSERT INTO confirmed VALUES (1)")
        .expect("a commit confirmed by the synchronous standby");
}
