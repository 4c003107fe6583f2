//! Preferred synchronous durability (`TUSK_SYNC_DURABILITY=preferred`): the primary's manager
//! keeps `synchronous_standby_names` at `ANY min(n, streaming)`, so commits are confirmed by a
//! streaming replica and never wait for a missing one.

mod common;

use std::time::{Duration, Instant};

use common::*;

const SHOW: &str = "SHOW synchronous_standby_names";
const SYNC_STATE: &str =
    "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'demo-1'";

/// Members whose managers own the setting with `ANY number`; nothing started, demo-0 holds
/// the Lease.
fn preferred(names: &[&str], number: &str) -> Cluster {
    preferred_with(names, number, "")
}

/// [`preferred`] with `settings` in every member's postgresql.conf.
fn preferred_with(names: &[&str], number: &str, settings: &str) -> Cluster {
    let mut cluster = Cluster::with_settings(names, settings);
    for member in &mut cluster.members {
        member.set_env("TUSK_SYNC_DURABILITY", Some("preferred"));
        member.set_env("TUSK_SYNC_NUMBER", Some(number));
    }
    cluster.set_lease("demo-0", true);
    cluster
}

fn preferred_pair() -> Cluster {
    preferred(&["demo-0", "demo-1"], "1")
}

/// Runs `sql` on `member` in a thread and returns how long it took; panics when it fails or
/// has not returned after `limit` (a commit waiting for a replica that is not there).
fn returns_within(member: &Instance, sql: &str, limit: Duration) -> Duration {
    let (port, query) = (member.port, sql.to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(psql_on(
            port,
            "postgres",
            SUPERUSER_PASSWORD,
            "postgres",
            &query,
        ));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(_)) => started.elapsed(),
        Ok(Err(e)) => panic!("{sql}: {e}"),
        Err(_) => panic!("{sql}: no answer after {limit:?}"),
    }
}

fn insert(value: &str) -> String {
    format!("CREATE TABLE IF NOT EXISTS t (v text); INSERT INTO t VALUES ('{value}')")
}

#[test]
fn preferred_durability_waits_for_streaming_replicas_only() {
    let mut cluster = preferred_pair();
    cluster.member("demo-0").start();
    let primary = cluster.member("demo-0");
    primary.wait_ready_as("primary", Duration::from_secs(90));
    // No replica at all: the commit returns.
    let alone = returns_within(primary, &insert("alone"), Duration::from_secs(5));
    assert_eq!(primary.psql(SHOW).unwrap(), "");

    cluster.member("demo-1").start();
    let replica = cluster.member("demo-1");
    replica.wait_ready_as("replica", Duration::from_secs(90));
    let primary = &cluster.members[0];
    let any_1 = r#"ANY 1 ("demo-1")"#;
    wait_for_value(primary, SHOW, any_1, Duration::from_secs(30));
    wait_for_value(primary, SYNC_STATE, "quorum", Duration::from_secs(30));
    returns_within(primary, &insert("confirmed"), Duration::from_secs(10));
    write_and_see_replicated(primary, &cluster.members[1], "replayed");

    // The replica goes away: commits keep returning, and the primary stops waiting.
    cluster.member("demo-1").stop();
    let primary = &cluster.members[0];
    let degraded = returns_within(primary, &insert("degraded"), Duration::from_secs(5));
    wait_for_value(primary, SHOW, "", Duration::from_secs(5));
    eprintln!("commit alone: {alone:?}; first commit after the replica stopped: {degraded:?}");
}

/// The value set with `ALTER SYSTEM` is not in force after a restart: a primary whose cluster
/// no longer asks for preferred durability gets postgresql.conf's setting, not the leftover.
#[test]
fn a_restart_drops_the_value_the_manager_set() {
    let mut cluster = preferred_pair();
    start_streaming(&mut cluster);
    let any_1 = r#"ANY 1 ("demo-1")"#;
    wait_for_value(&cluster.members[0], SHOW, any_1, Duration::from_secs(30));
    let auto = cluster.members[0].pgdata.join("postgresql.auto.conf");
    assert!(std::fs::read_to_string(&auto).unwrap().contains(any_1));

    cluster.member("demo-1").stop();
    let primary = cluster.member("demo-0");
    primary.stop();
    primary.set_env("TUSK_SYNC_DURABILITY", None);
    primary.set_env("TUSK_SYNC_NUMBER", None);
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(60));
    assert_eq!(primary.psql(SHOW).unwrap(), "");
    assert!(
        !std::fs::read_to_string(&auto)
            .unwrap()
            .contains("synchronous_standby_names")
    );
    returns_within(primary, &insert("after restart"), Duration::from_secs(5));
}

/// After a failover the new primary, alone at first, does not wait; once the former primary
/// has rejoined and streams, the new primary waits for it.
#[test]
fn the_promoted_replica_takes_over_the_setting() {
    let mut cluster = preferred_pair();
    start_streaming(&mut cluster);
    let to_demo_1 = r#"ANY 1 ("demo-1")"#;
    wait_for_value(
        &cluster.members[0],
        SHOW,
        to_demo_1,
        Duration::from_secs(30),
    );

    fail_over(&mut cluster);
    let new = &cluster.members[1];
    returns_within(new, &insert("on timeline 2"), Duration::from_secs(5));
    let old = &cluster.members[0];
    old.wait_streaming_from("demo-1", Duration::from_secs(90));
    let to_demo_0 = r#"ANY 1 ("demo-0")"#;
    wait_for_value(new, SHOW, to_demo_0, Duration::from_secs(30));
    let state = "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'demo-0'";
    wait_for_value(new, state, "quorum", Duration::from_secs(30));
    returns_within(new, &insert("confirmed by demo-0"), Duration::from_secs(10));
    // The rejoined standby does not carry the old primary's value into a later promotion.
    let auto = std::fs::read_to_string(old.pgdata.join("postgresql.auto.conf")).unwrap();
    assert!(!auto.contains("synchronous_standby_names"), "{auto}");
}

/// `ANY 2` with one of two replicas gone: a commit already waiting when the primary lowers the
/// setting to `ANY 1` returns then, not at the remaining replica's next status report.
#[test]
fn a_lowered_quorum_releases_commits_already_waiting() {
    // An idle replica reports only every wal_receiver_status_interval: a minute here, so that
    // without the manager's nudge the commit below waits about that long, far past its bound.
    let slow_reports = "wal_receiver_status_interval = 60s\n";
    let mut cluster = preferred_with(&["demo-0", "demo-1", "demo-2"], "2", slow_reports);
    start_streaming(&mut cluster);
    let any_2 = r#"ANY 2 ("demo-1", "demo-2")"#;
    wait_for_value(&cluster.members[0], SHOW, any_2, Duration::from_secs(30));
    returns_within(
        &cluster.members[0],
        &insert("by both"),
        Duration::from_secs(10),
    );

    cluster.member("demo-2").stop();
    let primary = &cluster.members[0];
    // Issued at once: demo-1 confirms it before the primary has noticed that demo-2 is gone.
    let took = returns_within(primary, &insert("by demo-1"), Duration::from_secs(5));
    let any_1 = r#"ANY 1 ("demo-1", "demo-2")"#;
    assert_eq!(primary.psql(SHOW).unwrap(), any_1);
    eprintln!("commit issued as a replica of ANY 2 stopped returned after {took:?}");
}
