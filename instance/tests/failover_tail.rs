//! A primary that dies with WAL unarchived (issue 46, defect 9), on real servers and MinIO.
//! The standby received that WAL, but with `archive_mode = on` it marks what it receives as
//! archived and recycles it at its next restartpoint (or at the checkpoint after its
//! promotion), so the old timeline's tail was lost to the archive unless the manager's heal
//! happened to upload it first. With `archive_mode = always` the standby keeps every file
//! until the bucket holds it (the primary's upload), and after its promotion archives what it
//! still holds as any primary does: PostgreSQL recycles none of it before.

mod common;

use std::time::Duration;

use common::bucket::{Bucket, archive_through_managers, write_and_switch};
use common::*;

fn key(system: &str, segment: &str) -> String {
    format!("tests/demo/wal/{system}/{}/{segment}.zst", &segment[..8])
}

fn archive_field(member: &Instance, field: &str) -> serde_json::Value {
    member
        .status()
        .map(|s| s["archive"][field].clone())
        .unwrap_or_default()
}

#[test]
fn the_promoted_standby_archives_the_tail_the_dead_primary_never_archived() {
    let bucket = Bucket::start();
    // No wal_keep_size (the operator sets none): a restartpoint recycles what it may.
    let mut cluster = Cluster::with_settings(&["demo-0", "demo-1"], "wal_keep_size = 0\n");
    archive_through_managers(&mut cluster, &bucket);
    start_streaming(&mut cluster);
    let (old, standby) = (&cluster.members[0], &cluster.members[1]);
    let system = old
        .psql("SELECT system_identifier FROM pg_control_system()")
        .expect("system identifier");

    // While the primary archives, the standby holds nothing: it is told each file is archived
    // once the bucket has it, and nothing it waits for counts as a failure.
    let archived = write_and_switch(old, "archived by the primary");
    wait_for("the primary's upload", Duration::from_secs(60), || {
        bucket
            .keys("tests/demo/wal/")
            .contains(&key(&system, &archived))
    });
    write_and_see_replicated(old, standby, "replayed");
    wait_for("the standby holds nothing", Duration::from_secs(60), || {
        archive_field(standby, "pending") == 0
    });

    // From now on the primary's uploads fail (as when it dies before they end).
    old.psql("ALTER SYSTEM SET archive_command = 'false'")
        .expect("archive_command");
    old.psql("SELECT pg_reload_conf()").expect("reload");
    let tail: Vec<String> = (0..3)
        .map(|i| write_and_switch(old, &format!("the tail, {i}")))
        .collect();
    // The standby replays a checkpoint past the tail and makes it its restartpoint: with
    // archive_mode = on, the tail is recycled here.
    write_and_see_replicated(old, standby, "after the tail");
    old.psql("CHECKPOINT").expect("checkpoint");
    write_and_see_replicated(old, standby, "after the checkpoint");
    standby.psql("CHECKPOINT").expect("restartpoint");
    let held = archive_field(standby, "pending");
    assert!(
        held.as_u64().is_some_and(|n| n >= tail.len() as u64),
        "the standby holds the tail: pending {held}"
    );
    assert_eq!(
        archive_field(standby, "failedCount"),
        0,
        "holding is no failure"
    );
    assert_eq!(
        archive_field(standby, "archivedCount"),
        0,
        "a standby uploads nothing"
    );
    let keys = bucket.keys("tests/demo/wal/");
    for segment in &tail {
        assert!(!keys.contains(&key(&system, segment)), "{segment} archived");
    }

    fail_over(&mut cluster);
    let promoted = &cluster.members[1];
    let mut keys = Vec::new();
    let whole = wait_until(Duration::from_secs(60), || {
        keys = bucket.keys("tests/demo/wal/");
        tail.iter().all(|s| keys.contains(&key(&system, s)))
    });
    assert!(
        whole,
        "the tail {tail:?} in the bucket after the promotion; it holds {keys:?}; the promoted \
         server's archive: {}",
        promoted.status().unwrap_or_default()["archive"]
    );
}
