//! A bucket outage under writes, on a real server and a real MinIO (issue 27, the disk policy of
//! docs/src/design/pitr.md §7). While MinIO is down the archiver fails loudly and PostgreSQL keeps
//! every WAL file; when it returns the backlog drains with no gap. With the volume past the
//! policy's threshold the archive gives way instead: the files are released unarchived, the gap
//! is reported while it lasts, and its marker reaches the bucket when it answers.

mod common;

use std::time::Duration;

use common::bucket::{Bucket, archive_through_managers, write_and_switch};
use common::*;

const GAP_AT: &str = "TUSK_ARCHIVE_GAP_AT_PERCENT";

fn archive(member: &Instance) -> serde_json::Value {
    member
        .status()
        .map(|s| s["archive"].clone())
        .unwrap_or_default()
}

/// The segment numbers of timeline 1 in the bucket.
fn archived_segments(bucket: &Bucket, wal: &str) -> Vec<u64> {
    let folder = format!("{wal}00000001/");
    bucket
        .keys(&folder)
        .iter()
        .filter_map(|k| k.strip_prefix(&folder)?.strip_suffix(".zst"))
        .filter_map(|name| u64::from_str_radix(name.get(16..24)?, 16).ok())
        .collect()
}

fn number(segment: &str) -> u64 {
    u64::from_str_radix(&segment[16..24], 16).expect("a segment name")
}

#[test]
fn a_bucket_outage_keeps_every_file_and_drains_then_a_full_volume_gives_way_with_a_marker() {
    let mut bucket = Bucket::start();
    let mut cluster = Cluster::new(&["demo-0"]);
    archive_through_managers(&mut cluster, &bucket);
    cluster.member("demo-0").set_env(GAP_AT, Some("100"));
    cluster.set_lease("demo-0", true);
    cluster.member("demo-0").start();
    let primary = cluster.member("demo-0");
    primary.wait_ready_as("primary", Duration::from_secs(90));
    let system = primary
        .psql("SELECT system_identifier FROM pg_control_system()")
        .expect("system identifier");
    let wal = format!("tests/demo/wal/{system}/");
    let first = write_and_switch(primary, "before the outage");
    wait_for(
        "the first segment archived",
        Duration::from_secs(60),
        || archived_segments(&bucket, &wal).contains(&number(&first)),
    );

    // The outage, under writes: loud, and nothing released (the policy is "never").
    bucket.server.stop();
    let during: Vec<String> = (0..3)
        .map(|i| write_and_switch(primary, &format!("during {i}")))
        .collect();
    wait_for(
        "the archiver failing with files waiting",
        Duration::from_secs(60),
        || {
            let a = archive(primary);
            a["failing"] == true && a["pending"].as_u64() >= Some(3)
        },
    );
    let status = archive(primary);
    assert_eq!(status["gaveWayCount"], 0, "{status}");
    assert!(status["lastError"].as_str().is_some_and(|e| !e.is_empty()));
    for segment in &during {
        assert!(
            primary.pgdata.join("pg_wal").join(segment).exists(),
            "{segment} kept on the volume"
        );
    }
    let metrics = http_get(primary.status_port, "/metrics").unwrap_or_default();
    assert!(
        metrics.contains("tusk_instance_archive_gap_open{pod=\"demo-0\"} 0"),
        "{metrics}"
    );

    // MinIO back: the backlog drains (a new segment wakes PostgreSQL's archiver) with no gap.
    bucket.runtime.block_on(bucket.server.resume());
    let after = write_and_switch(primary, "after the outage");
    wait_for("the backlog drained", Duration::from_secs(120), || {
        let a = archive(primary);
        a["pending"] == 0 && a["failing"] == false
    });
    let archived = archived_segments(&bucket, &wal);
    for n in number(&first)..=number(&after) {
        assert!(
            archived.contains(&n),
            "segment {n:X} missing: {archived:X?}"
        );
    }
    assert!(bucket.keys(&format!("{wal}gaps/")).is_empty());

    // The same outage with the volume past the threshold (1 %: any volume is): once uploads
    // have failed for the policy's minimum outage (a minute; one failure is no outage), the
    // files are released unarchived, and the gap says which.
    let primary = cluster.member("demo-0");
    primary.stop();
    primary.set_env(GAP_AT, Some("1"));
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(90));
    let outage = std::time::Instant::now();
    bucket.server.stop();
    let released: Vec<String> = (0..3)
        .map(|i| write_and_switch(primary, &format!("released {i}")))
        .collect();
    wait_for("the files released", Duration::from_secs(180), || {
        let a = archive(primary);
        a["pending"] == 0 && a["gap"]["files"].as_u64() >= Some(3)
    });
    assert!(
        outage.elapsed() >= Duration::from_secs(55),
        "released {:?} into the outage, before its minimum",
        outage.elapsed()
    );
    let gap = archive(primary)["gap"].clone();
    assert_eq!(gap["firstSegment"], released[0].as_str(), "{gap}");
    assert!(gap["closedAt"].is_null(), "{gap}");
    // The open gap's marker is kept on the volume until the bucket takes it.
    let mut local = primary.pgdata.as_os_str().to_owned();
    local.push(".tusk-archive-gaps");
    let local = std::path::PathBuf::from(local);
    let kept = std::fs::read_dir(&local).map(|d| d.count());
    assert!(
        matches!(kept, Ok(n) if n >= 1),
        "no marker in {}: {kept:?}",
        local.display()
    );
    assert_eq!(gap["systemIdentifier"], system.as_str());
    let metrics = http_get(primary.status_port, "/metrics").unwrap_or_default();
    assert!(
        metrics.contains("tusk_instance_archive_gap_open{pod=\"demo-0\"} 1"),
        "{metrics}"
    );

    // MinIO back: within a probe interval an upload succeeds, the gap closes and its marker is
    // in the bucket; what was released is not.
    bucket.runtime.block_on(bucket.server.resume());
    let gaps = format!("{wal}gaps/");
    let mut last = String::new();
    wait_for(
        "the gap marker in the bucket",
        Duration::from_secs(90),
        || {
            last = write_and_switch(primary, "after the gap");
            !bucket.keys(&gaps).is_empty()
        },
    );
    let markers = bucket.keys(&gaps);
    let marker = markers[0].strip_prefix(&gaps).unwrap_or_default();
    assert!(
        marker.starts_with(&format!("{}-", released[0])),
        "{markers:?}"
    );
    let archived = archived_segments(&bucket, &wal);
    for segment in &released {
        assert!(!archived.contains(&number(segment)), "{segment} archived");
    }
    wait_for("archiving after the gap", Duration::from_secs(60), || {
        archived_segments(&bucket, &wal).contains(&number(&last))
    });
    let closed = archive(primary)["gap"].clone();
    assert!(closed["closedAt"].is_i64(), "{closed}");
    // Gone from the volume (the directory emptied, or removed with it).
    let left = std::fs::read_dir(&local).map_or(0, |d| d.count());
    assert_eq!(left, 0, "the marker left the volume");
}
