//! Retention by recovery window: which base backups go (plain values), and which WAL goes with
//! them (an in-memory bucket, through `prune`).

use bytes::Bytes;
use std::time::Duration;

use super::*;
use crate::compression::Compression;
use crate::manifest::Manifest;
use crate::ownership::Owner;
use crate::prune::prune;
use crate::retention::Policy;
use crate::store::memory::MemoryStore;

const DAY: u64 = 86_400;
const MIB16: u64 = 16 << 20;

fn now() -> jiff::Timestamp {
    "2026-11-28T00:00:00Z".parse().unwrap()
}

fn days_ago(days: i64) -> jiff::Timestamp {
    now() - jiff::SignedDuration::from_hours(24 * days)
}

/// The ids deleted among base backups completed the given numbers of days ago.
fn selected(ages: &[i64], window_days: u64) -> Vec<String> {
    let all = ages
        .iter()
        .map(|age| Candidate {
            backup_id: format!("d{age}"),
            completed_at: days_ago(*age),
        })
        .collect();
    select_for_deletion(all, Duration::from_secs(window_days * DAY), now())
        .into_iter()
        .map(|c| c.backup_id)
        .collect()
}

#[test]
fn the_window_keeps_its_backups_and_the_newest_one_before_it() {
    // d8 is where a restore to seven days ago starts; d10 and d12 serve no point of the window.
    assert_eq!(selected(&[1, 3, 6, 8, 10, 12], 7), ["d12", "d10"]);
    assert!(selected(&[1, 3, 6], 7).is_empty(), "all inside the window");
    assert!(
        selected(&[1, 3, 6, 8], 30).is_empty(),
        "nothing before the window"
    );
    // Every backup older than the window: the newest still starts a restore to its first second.
    assert_eq!(selected(&[20, 15, 40], 7), ["d40", "d20"]);
    assert!(selected(&[90], 7).is_empty(), "the only base backup stays");
}

fn physical(system: &str, start: &str, size: Option<u64>) -> PhysicalBackup {
    PhysicalBackup {
        system_identifier: system.into(),
        timeline: 1,
        start_lsn: start.into(),
        stop_lsn: start.into(),
        wal_segment_size: size,
    }
}

#[test]
fn a_floor_is_the_oldest_start_of_any_kept_backup_of_a_system_of_ours() {
    let ours = [
        physical("7", "0/9000028", Some(MIB16)),
        physical("8", "0/3000028", None),
    ];
    let all = [
        ours[0].clone(),
        ours[1].clone(),
        // A peer's base backup of system 7 still needs the WAL from its start.
        physical("7", "0/5000028", None),
        // Only a peer's on system 9: none of ours, so its WAL is not ours to delete.
        physical("9", "0/1000000", Some(MIB16)),
    ];
    let floors = floors(&ours, &all);
    assert_eq!(
        floors,
        [Floor {
            system_identifier: 7,
            start: Lsn::parse("0/5000028").unwrap(),
            segment_size: MIB16,
        }],
        "system 8 has no segment size recorded: none of its WAL is deleted"
    );
    let unreadable = [physical("7", "not an lsn", Some(MIB16))];
    assert!(super::floors(&ours[..1], &[ours[0].clone(), unreadable[0].clone()]).is_empty());
}

async fn put(store: &MemoryStore, key: String) {
    store.put(&key, Bytes::from_static(b"w")).await.unwrap();
}

/// Our base backup `id` of system 7, completed `days` ago, replaying from `start`.
async fn base_backup(
    store: &MemoryStore,
    loc: &ClusterLocation,
    id: &str,
    owner: &str,
    days: i64,
    start: &str,
) {
    let manifest = Manifest {
        format_version: crate::manifest::FORMAT_VERSION,
        backup_id: id.into(),
        namespace: loc.namespace().into(),
        cluster: loc.cluster().into(),
        cluster_uid: Some(owner.into()),
        started_at: days_ago(days),
        completed_at: days_ago(days),
        server_version: "15".into(),
        pg_dump_version: "pg_basebackup (PostgreSQL) 15".into(),
        compression: Compression::Zstd,
        files: Vec::new(),
        physical: Some(physical("7", start, Some(MIB16))),
    };
    let json = Bytes::from(manifest.to_json().unwrap());
    store.put(&loc.manifest_key(id), json).await.unwrap();
    put(store, loc.object_key(id, "base.tar.zst")).await;
}

/// The archived WAL of system `system` at `loc`: (timeline, file name) pairs.
fn wal_key(loc: &ClusterLocation, system: u64, folder: &str, name: &str) -> String {
    format!("{}{folder}/{name}.zst", loc.wal_prefix(system))
}

fn wal_left(store: &MemoryStore, loc: &ClusterLocation, system: u64) -> Vec<String> {
    let prefix = loc.wal_prefix(system);
    let mut left: Vec<String> = (store.keys().into_iter())
        .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned))
        .collect();
    left.sort();
    left
}

fn window(days: u64) -> Policy {
    Policy {
        recovery_window: Some(Duration::from_secs(days * DAY)),
        ..Policy::default()
    }
}

#[tokio::test]
async fn base_backups_and_the_wal_only_they_needed_go_together() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    base_backup(&store, &loc, "base-old", "us", 10, "0/2000028").await;
    base_backup(&store, &loc, "base-mid", "us", 8, "0/5000028").await;
    base_backup(&store, &loc, "base-new", "us", 1, "0/9000028").await;
    for segment in 1..=10 {
        put(
            &store,
            wal_key(
                &loc,
                7,
                "00000001",
                &format!("0000000100000000{segment:08X}"),
            ),
        )
        .await;
    }
    for name in [
        "000000020000000000000004.partial",
        "000000020000000000000006",
    ] {
        put(&store, wal_key(&loc, 7, "00000002", name)).await;
    }
    put(
        &store,
        wal_key(
            &loc,
            7,
            "00000001",
            "000000010000000000000004.00000028.backup",
        ),
    )
    .await;
    put(&store, wal_key(&loc, 7, "history", "00000002.history")).await;
    // Another system under the same prefix (a predecessor of the same name): not touched.
    put(
        &store,
        wal_key(&loc, 8, "00000001", "000000010000000000000001"),
    )
    .await;

    let report = prune(&store, &loc, &Owner::new(Some("us")), window(7), now())
        .await
        .unwrap();

    assert_eq!(report.deleted, ["base-old"]);
    assert_eq!(report.kept, ["base-mid", "base-new"]);
    // base-mid starts in segment 5: segments 1-4 on every timeline go, 5 on and history stay.
    assert_eq!(report.wal_objects_deleted, 6);
    assert_eq!(
        wal_left(&store, &loc, 7),
        [
            "00000001/000000010000000000000005.zst",
            "00000001/000000010000000000000006.zst",
            "00000001/000000010000000000000007.zst",
            "00000001/000000010000000000000008.zst",
            "00000001/000000010000000000000009.zst",
            "00000001/00000001000000000000000A.zst",
            "00000002/000000020000000000000006.zst",
            "history/00000002.history.zst",
        ]
    );
    assert_eq!(wal_left(&store, &loc, 8).len(), 1);
}

#[tokio::test]
async fn a_base_backup_retention_may_not_delete_keeps_its_wal() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    // Protected (the newest verified, or the one the cluster was restored from): not a
    // candidate, and the WAL from its start stays with it.
    base_backup(&store, &loc, "restored-from", "us", 12, "0/1000028").await;
    base_backup(&store, &loc, "base-old", "us", 10, "0/3000028").await;
    base_backup(&store, &loc, "base-new", "us", 1, "0/9000028").await;
    for segment in 1..=9 {
        put(
            &store,
            wal_key(
                &loc,
                7,
                "00000001",
                &format!("0000000100000000{segment:08X}"),
            ),
        )
        .await;
    }
    let owner = Owner::new(Some("us")).protecting("restored-from");

    let report = prune(&store, &loc, &owner, window(7), now()).await.unwrap();

    assert!(report.deleted.is_empty(), "{report:?}");
    assert_eq!(report.wal_objects_deleted, 0);
    assert_eq!(wal_left(&store, &loc, 7).len(), 9);
}

#[tokio::test]
async fn without_a_window_base_backups_and_wal_stay() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    base_backup(&store, &loc, "base-old", "us", 100, "0/2000028").await;
    base_backup(&store, &loc, "base-new", "us", 1, "0/9000028").await;
    put(
        &store,
        wal_key(&loc, 7, "00000001", "000000010000000000000002"),
    )
    .await;
    let keep_one = Policy {
        keep: Some(1),
        max_age: Some(Duration::from_secs(DAY)),
        ..Policy::default()
    };
    let report = prune(&store, &loc, &Owner::new(Some("us")), keep_one, now())
        .await
        .unwrap();
    assert!(report.deleted.is_empty());
    assert_eq!(wal_left(&store, &loc, 7).len(), 1);
}

/// Issue 46, defect 5: a base backup taken on timeline 1 after the cluster's history left it
/// (the old primary of a failover went on there) starts no restore along the newest timeline.
/// It anchored the window, and the only base backup reaching timeline 2 went.
#[tokio::test]
async fn a_base_backup_off_the_newest_history_never_anchors_the_window() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    // Timeline 1 was left for 2 at 0/5000060.
    let archive = crate::wal::WalArchive::new(&loc, 7);
    let history = crate::wal::WalName::parse("00000002.history").unwrap();
    crate::wal::push(
        &store,
        &archive,
        &history,
        b"1\t0/5000060\tno recovery target\n",
    )
    .await
    .unwrap();
    base_backup(&store, &loc, "base-live", "us", 10, "0/2000028").await;
    base_backup(&store, &loc, "base-branch", "us", 8, "0/6000028").await;

    let report = prune(&store, &loc, &Owner::new(Some("us")), window(7), now())
        .await
        .unwrap();

    assert_eq!(report.kept, ["base-live"], "deleted {:?}", report.deleted);
    assert_eq!(report.deleted, ["base-branch"]);
}
