//! WAL archiving by the instance manager (issue 27) on real servers and a real MinIO: the
//! primary's `archive_command` is `tusk-instance wal-push %p`, which hands each file to the
//! manager's archiver; a replica archives nothing; after a failover the new primary continues
//! the archive on its timeline, history file included; no server process holds the bucket's
//! credentials.

mod common;

use std::time::Duration;

use common::bucket::{Bucket, archive_through_managers, archiving_pair, write_and_switch};
use common::*;
use tusk_testkit::minio;

fn wait_for_key(bucket: &Bucket, key: &str) {
    let prefix = key.rsplit_once('/').map_or("", |(dir, _)| dir);
    wait_for(
        &format!("{key} in the bucket"),
        Duration::from_secs(60),
        || bucket.keys(prefix).iter().any(|k| k == key),
    );
}

#[test]
fn the_primary_archives_through_its_manager_and_the_new_primary_continues_after_a_failover() {
    let bucket = Bucket::start();
    let mut cluster = archiving_pair(&bucket);
    let primary = &cluster.members[0];
    let system = primary
        .psql("SELECT system_identifier FROM pg_control_system()")
        .expect("system identifier");
    let wal = format!("tests/demo/wal/{system}/");

    let segment = write_and_switch(primary, "before");
    wait_for_key(&bucket, &format!("{wal}00000001/{segment}.zst"));
    let status = primary.status().expect("status");
    assert!(
        status["archive"]["archivedCount"].as_u64() >= Some(1),
        "{status}"
    );
    assert_eq!(status["archive"]["failedCount"], 0, "{status}");
    let metrics = http_get(primary.status_port, "/metrics").unwrap_or_default();
    assert!(
        metrics.contains("tusk_instance_archive_archived_total{pod=\"demo-0\"}"),
        "{metrics}"
    );

    // The credentials stay in the manager: not in the postmaster's environment, which every
    // backend and the archive command inherit.
    let postmaster = primary.postmaster_pid().expect("postmaster");
    let environ = std::fs::read(format!("/proc/{postmaster}/environ")).expect("environ");
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        environ.contains("TUSK_SOCKET_DIR="),
        "the hook finds the socket"
    );
    for secret in [
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        minio::SECRET_KEY,
    ] {
        assert!(
            !environ.contains(secret),
            "{secret} in the postmaster's environment"
        );
    }
    // The replica uploads nothing: it keeps what it receives until the primary's upload
    // (archive_mode = always), and counts nothing archived.
    let replica_status = cluster.members[1].status().expect("status");
    assert_eq!(
        replica_status["archive"]["archivedCount"], 0,
        "{replica_status}"
    );

    fail_over(&mut cluster);
    let promoted = &cluster.members[1];
    wait_for_key(&bucket, &format!("{wal}history/00000002.history.zst"));
    let segment = write_and_switch(promoted, "after");
    assert!(segment.starts_with("00000002"), "{segment}");
    wait_for_key(&bucket, &format!("{wal}00000002/{segment}.zst"));
    let keys = bucket.keys(&wal);
    assert!(
        keys.iter().all(|k| k.ends_with(".zst")),
        "only compressed files: {keys:?}"
    );
}

/// The states a crash leaves: the postmaster killed (its archiver with it, perhaps mid-upload)
/// and restarted in place by the manager; the next segments are archived as before.
#[test]
fn archiving_goes_on_after_the_postmaster_is_killed_and_restarted() {
    let bucket = Bucket::start();
    let cluster = archiving_pair(&bucket);
    let primary = &cluster.members[0];
    let system = primary
        .psql("SELECT system_identifier FROM pg_control_system()")
        .expect("system identifier");
    let wal = format!("tests/demo/wal/{system}/00000001/");
    let segment = write_and_switch(primary, "before");
    wait_for_key(&bucket, &format!("{wal}{segment}.zst"));

    let killed = primary.postmaster_pid().expect("postmaster");
    unsafe { libc::kill(killed, libc::SIGKILL) };
    wait_for("the postmaster restarted", Duration::from_secs(60), || {
        primary.postmaster_pid().is_some_and(|pid| pid != killed)
            && primary.psql("SELECT 1").is_ok()
    });
    for round in 0..3 {
        let segment = write_and_switch(primary, &format!("after {round}"));
        wait_for_key(&bucket, &format!("{wal}{segment}.zst"));
    }
}

/// The state a clean restart leaves: PostgreSQL 15's checkpointer, started while the startup
/// process still runs, sleeps for `checkpoint_timeout` without the `archive_timeout` bound, and
/// after a start that needs no end-of-recovery checkpoint nothing wakes it, so no segment is
/// closed by time until it next wakes (minutes). The manager wakes it; each restart here is
/// followed by writes alone (no switch by hand) until `archive_timeout` closes a segment.
#[test]
fn archive_timeout_closes_segments_after_a_clean_restart_in_place() {
    let bucket = Bucket::start();
    let mut cluster = Cluster::with_settings(&["demo-0"], "archive_timeout = 2s\n");
    archive_through_managers(&mut cluster, &bucket);
    cluster.set_lease("demo-0", true);
    let primary = cluster.member("demo-0");
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(90));
    primary
        .psql("CREATE TABLE t (v int)")
        .expect("create table");
    for round in 0..3 {
        primary.terminate(Duration::from_secs(60));
        primary.start();
        primary.wait_ready_as("primary", Duration::from_secs(90));
        let open = primary
            .psql("SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
            .expect("current segment");
        // Ten times archive_timeout: the checkpointer's own sleep is 5 minutes.
        let took = wait_for(
            &format!("round {round}: {open} closed by archive_timeout and archived"),
            Duration::from_secs(20),
            || {
                let archived = primary
                    .psql(
                        "INSERT INTO t VALUES (1); \
                         SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver",
                    )
                    .unwrap_or_default();
                archived.trim() >= open.as_str()
            },
        );
        eprintln!("round {round}: {open} archived {took:?} after the restart");
    }
}
