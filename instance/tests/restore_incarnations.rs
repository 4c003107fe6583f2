//! A cluster restored twice under one name (deleted with its volumes in between, its archive
//! kept: `onDelete` defaults to Retain). A physical restore keeps the source's system
//! identifier, so both incarnations archive under the same prefix; each must choose a timeline
//! no other used, or the second's files collide with the first's and its archiving stops
//! behind the conflict. Before: the source's archive alone decided, and both took timeline 2.

mod common;

use std::time::Duration;

use common::bucket::{Bucket, archive_through_managers};
use common::restore::{a_system_that_lived_and_died, set_to_restore};
use common::*;

const PASSWORD: &str = "each incarnation's own";

/// One incarnation of `tests/copy`, restored from the source to the end of its archive and
/// archiving itself: it writes `label`, closes the segment, and waits for the archive to hold
/// it. Returns the timeline it promoted to; its volumes go with it.
fn incarnation(bucket: &Bucket, system: &str, label: &str) -> String {
    let mut copy = Cluster::new(&["copy-0"]);
    archive_through_managers(&mut copy, bucket);
    copy.members[0].set_env("TUSK_CLUSTER", Some("copy"));
    set_to_restore(&mut copy, bucket, "base1", None, PASSWORD);
    copy.set_lease("copy-0", true);
    copy.member("copy-0").start();
    let member = &copy.members[0];
    member.wait_ready_as("primary", Duration::from_secs(180));
    let sql = |sql: &str| {
        member
            .psql_as("postgres", PASSWORD, "postgres", sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    sql(&format!("INSERT INTO who VALUES ('{label}')"));
    let segment = sql("SELECT pg_walfile_name(pg_switch_wal())");
    let timeline = segment[..8].to_owned();
    let key = format!("tests/copy/wal/{system}/{timeline}/{segment}.zst");
    wait_for(
        &format!("{label}'s segment {segment} archived"),
        Duration::from_secs(60),
        || bucket.keys("tests/copy/wal/").contains(&key),
    );
    let archive = member.status_field("archive");
    assert_eq!(
        archive["failedCount"], 0,
        "{label} archived without a failure: {archive}"
    );
    copy.member("copy-0").stop();
    timeline
}

#[test]
fn a_cluster_restored_twice_under_one_name_archives_each_incarnation_on_its_own_timeline() {
    let bucket = Bucket::start();
    let system = a_system_that_lived_and_died(&bucket, "base1", "source");
    let first = incarnation(&bucket, &system, "first");
    let second = incarnation(&bucket, &system, "second");
    assert_eq!(
        first, "00000002",
        "the first takes the timeline after the source's"
    );
    assert_eq!(
        second, "00000003",
        "the second passes over the first's timeline, which the archive holds"
    );
    let history = |t: &str| format!("tests/copy/wal/{system}/history/{t}.history.zst");
    let keys = bucket.keys("tests/copy/wal/");
    for t in [&first, &second] {
        assert!(
            keys.contains(&history(t)),
            "{t}'s history archived: {keys:?}"
        );
    }
}
