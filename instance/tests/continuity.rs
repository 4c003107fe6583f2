//! The archive continuity check on a real server and a real MinIO (issue 28,
//! docs/src/design/pitr.md §6): the primary's manager checks its archive after each base backup and
//! on a schedule, finds it whole across a failover, and names a segment deleted from the bucket.
//! After a base backup the manager also writes the restore point its verification recovers to;
//! a promoted standby fills a hole of the old timeline from its own pg_wal.

mod common;

use std::time::Duration;

use backup_store::store::ObjectStore;
use common::bucket::{Bucket, archive_through_managers, write_and_switch};
use common::restore::{agent_in, base_backup, base_backup_from};
use common::*;

const EVERY: &str = "TUSK_CONTINUITY_EVERY_SECONDS";

fn continuity(member: &Instance) -> serde_json::Value {
    member
        .status()
        .map(|s| s["archive"]["continuity"].clone())
        .unwrap_or_default()
}

/// Waits for a report from the check that `done` accepts; dumps the last one on failure.
fn wait_for_check(
    member: &Instance,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let seen = wait_until(Duration::from_secs(120), || {
        last = continuity(member);
        done(&last)
    });
    assert!(seen, "{what}: the last report was {last}");
    last
}

fn system_of(member: &Instance) -> String {
    member
        .psql("SELECT system_identifier FROM pg_control_system()")
        .expect("system identifier")
}

/// Every file closed so far archived: nothing left `.ready` on `member`.
fn archived_everything(member: &Instance) {
    wait_for("nothing left to archive", Duration::from_secs(60), || {
        member
            .status()
            .is_some_and(|s| s["archive"]["pending"] == 0 && s["archive"]["archivedCount"] != 0)
    });
}

#[test]
fn a_base_backup_brings_a_check_that_finds_the_archive_whole_and_then_names_a_deleted_segment() {
    let bucket = Bucket::start();
    let mut cluster = Cluster::new(&["demo-0"]);
    archive_through_managers(&mut cluster, &bucket);
    // The schedule is an hour: the check seen here is the one the base backup asked for.
    cluster.member("demo-0").set_env(EVERY, Some("3600"));
    let agent = agent_in(cluster.dir.path());
    let installed = agent.display().to_string();
    cluster
        .member("demo-0")
        .set_env("TUSK_AGENT_BINARY", Some(&installed));
    cluster.set_lease("demo-0", true);
    cluster.member("demo-0").start();
    let primary = &cluster.members[0];
    primary.wait_ready_as("primary", Duration::from_secs(90));
    write_and_switch(primary, "before the base backup");
    base_backup(&agent, &cluster, &bucket, "base1");
    let segments: Vec<String> = (0..4)
        .map(|i| write_and_switch(primary, &format!("after {i}")))
        .collect();
    archived_everything(primary);
    let report = wait_for_check(primary, "a check counting the base backup", |r| {
        r["baseBackups"] == 1
    });
    assert_eq!(report["missingCount"], 0, "{report}");
    assert!(
        report["missing"].is_null() && report["foreign"].is_null(),
        "{report}"
    );
    assert!(report["firstSegment"].is_string(), "{report}");
    // Before that check, the restore point the backup's verification recovers to.
    let system = system_of(primary);
    let points = format!("tests/demo/wal/{system}/points/");
    wait_for(
        "the verification's restore point",
        Duration::from_secs(60),
        || bucket.keys(&points).len() == 1,
    );

    // A segment between the base backup and the newest one goes from the bucket and the server;
    // the next check (asked for by the next base backup) names it, and nothing else.
    let gone = &segments[1];
    let key = format!("tests/demo/wal/{system}/00000001/{gone}.zst");
    bucket
        .runtime
        .block_on(bucket.store.delete_many(std::slice::from_ref(&key)))
        .expect("delete a segment");
    // Gone from the server too (else the check puts it back from there, as the failover test
    // shows): archived and behind the checkpoint, PostgreSQL needs it no more.
    let local = primary.pgdata.join("pg_wal").join(gone);
    std::fs::remove_file(&local).expect("remove the local copy");
    base_backup(&agent, &cluster, &bucket, "base2");
    let report = wait_for_check(primary, "a check naming the deleted segment", |r| {
        r["baseBackups"] == 2
    });
    assert_eq!(report["missing"], serde_json::json!([gone]), "{report}");
    assert_eq!(report["missingCount"], 1, "{report}");
    let metrics = http_get(primary.status_port, "/metrics").unwrap_or_default();
    assert!(
        metrics.contains("tusk_instance_archive_continuity_broken_files{pod=\"demo-0\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_failover_leaves_no_false_alarm_and_the_new_primary_fills_a_hole_from_its_own_wal() {
    let bucket = Bucket::start();
    let mut cluster = Cluster::new(&["demo-0", "demo-1"]);
    archive_through_managers(&mut cluster, &bucket);
    for member in &mut cluster.members {
        member.set_env(EVERY, Some("2"));
    }
    start_streaming(&mut cluster);
    let agent = agent_in(cluster.dir.path());
    let old = &cluster.members[0];
    old.wait_ready_as("primary", Duration::from_secs(90));
    base_backup(&agent, &cluster, &bucket, "base1");
    let on_timeline_1: Vec<String> = (0..3)
        .map(|i| write_and_switch(old, &format!("timeline 1, {i}")))
        .collect();
    let report = wait_for_check(old, "the primary's check of timeline 1", |r| {
        r["baseBackups"] == 1 && r["timelines"] == serde_json::json!([1])
    });
    assert_eq!(report["missingCount"], 0, "{report}");
    // What the old primary closed is archived before it goes (a primary that dies with WAL
    // unarchived leaves a real hole, which the check would rightly name).
    archived_everything(&cluster.members[0]);
    cluster.members[1].wait_streaming_from("demo-0", Duration::from_secs(60));
    fail_over(&mut cluster);

    let promoted = &cluster.members[1];
    let last = write_and_switch(promoted, "timeline 2");
    assert!(last.starts_with("00000002"), "{last}");
    archived_everything(promoted);
    let report = wait_for_check(promoted, "the new primary's check across the switch", |r| {
        r["timelines"] == serde_json::json!([1, 2]) && r["lastSegment"] == last.as_str()
    });
    assert_eq!(report["missingCount"], 0, "{report}");
    assert!(report["missingHistory"].is_null(), "{report}");
    assert!(report["foreign"].is_null(), "{report}");

    // The state a primary that died before archiving leaves: a segment of the old timeline
    // absent from the bucket. The new primary received it by streaming and still holds it: its
    // next check uploads it from its own pg_wal, and the archive is whole again.
    let system = system_of(promoted);
    let hole = &on_timeline_1[2];
    let key = format!("tests/demo/wal/{system}/00000001/{hole}.zst");
    bucket
        .runtime
        .block_on(bucket.store.delete_many(std::slice::from_ref(&key)))
        .expect("delete a segment");
    // The scheduled checks list what arrived since the last one; the check after a base backup
    // lists the whole archive (as the one at a promotion does, where a real hole is found).
    base_backup_from(&agent, &cluster, 1, &bucket, "base2");
    let report = wait_for_check(promoted, "a check filling the hole", |r| {
        r["healed"] == serde_json::json!([hole])
    });
    assert_eq!(report["missingCount"], 0, "{report}");
    assert!(
        bucket.keys("tests/demo/wal/").contains(&key),
        "{hole} back in the bucket"
    );
}
