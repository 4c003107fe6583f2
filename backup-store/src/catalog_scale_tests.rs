//! An archive on day 6 and after (over [`MAX_LIST_OBJECTS`] WAL files, the listing cap) on an
//! in-memory bucket that enforces the cap as S3 and GCS listings do: the catalog (retention,
//! restore admission, `base-restore latest`, verification) and `onDelete: Delete` cleanup must
//! not list it. Before, each listed the whole cluster prefix and failed with `TooLarge`.

use bytes::Bytes;

use super::*;
use crate::compression::Compression;
use crate::store::MAX_LIST_OBJECTS;
use crate::store::memory::MemoryStore;

const SYSTEM: u64 = 7;

async fn complete_backup(store: &MemoryStore, loc: &ClusterLocation, id: &str) {
    let manifest = Manifest {
        format_version: crate::manifest::FORMAT_VERSION,
        backup_id: id.into(),
        namespace: loc.namespace().into(),
        cluster: loc.cluster().into(),
        cluster_uid: Some("uid-us".into()),
        started_at: "2026-11-23T00:00:00Z".parse().unwrap(),
        completed_at: "2026-11-23T00:00:00Z".parse().unwrap(),
        server_version: "15".into(),
        pg_dump_version: "pg_dump (PostgreSQL) 15".into(),
        compression: Compression::None,
        files: Vec::new(),
        physical: None,
    };
    let json = Bytes::from(manifest.to_json().unwrap());
    store.put(&loc.manifest_key(id), json).await.unwrap();
    let dump = loc.object_key(id, "db-app.pgdump");
    store.put(&dump, Bytes::from_static(b"x")).await.unwrap();
}

/// A bucket with two backups, one either side of `wal/` in key order, and `segments` archived
/// WAL files of timeline 1.
async fn archive_of(segments: usize) -> (MemoryStore, ClusterLocation) {
    let store = MemoryStore::new("mem://b");
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    for id in ["base-1", "zz-last"] {
        complete_backup(&store, &loc, id).await;
    }
    let wal = loc.wal_prefix(SYSTEM);
    for n in 0..segments {
        store.insert(&format!("{wal}00000001/00000001{n:016X}.zst"), "w");
    }
    (store, loc)
}

#[tokio::test]
async fn the_catalog_and_cleanup_of_an_archive_past_the_listing_cap() {
    let segments = MAX_LIST_OBJECTS + 500;
    let (store, loc) = archive_of(segments).await;
    let whole = store.list(&loc.prefix()).await;
    assert!(
        matches!(whole, Err(store::StoreError::TooLarge { .. })),
        "the bucket enforces the cap: {:?}",
        whole.map(|l| l.len())
    );

    let catalog = load(&store, &loc)
        .await
        .expect("the catalog, without the archive");
    let ids: Vec<&str> = (catalog.backups.iter())
        .map(|b| b.manifest.backup_id.as_str())
        .collect();
    assert_eq!(ids, ["base-1", "zz-last"]);
    let mut pages = backup_objects(&store, &loc);
    while pages.next().await.unwrap().is_some() {}
    let requests = pages.requests;
    assert!(
        requests <= 3,
        "{requests} list requests for 4 backup objects"
    );

    let owner = Owner::new(Some("uid-us"));
    let done = delete_cluster(&store, &loc, &owner).await.unwrap();
    assert_eq!(done.objects_deleted, 4);
    let wal = delete_wal(&store, &loc, SYSTEM).await.unwrap();
    assert_eq!(wal, segments, "every WAL file, page by page");
    assert_eq!(store.keys(), Vec::<String>::new());
}

#[test]
fn a_walk_jumps_past_a_skipped_folder() {
    let next = store::next_after("p/ns/db/", "p/ns/db/wal/7/00000001/x.zst", &["wal/"]);
    assert!(next.as_str() > "p/ns/db/wal/7/ffffffff/zzzz.zst");
    assert!(next.as_str() < "p/ns/db/wal0");
    assert!(next.as_str() < "p/ns/db/zz-last/manifest.json");
    let plain = store::next_after("p/ns/db/", "p/ns/db/base-1/x", &["wal/"]);
    assert_eq!(plain, "p/ns/db/base-1/x");
}

/// Segment `n` of timeline 1 with 16 MiB segments: its name and its start.
#[cfg(feature = "wal")]
fn segment(n: u64) -> (String, crate::lsn::Lsn) {
    let name = format!("00000001{:08X}{:08X}", n / 256, n % 256);
    (name, crate::lsn::Lsn(n << 24))
}

#[cfg(feature = "wal")]
#[tokio::test]
async fn the_archives_own_walks_past_the_listing_cap() {
    use crate::recovery_window::{Floor, delete_wal_before};
    use crate::wal::{WalArchive, WalName};

    let segments = (MAX_LIST_OBJECTS + 500) as u64;
    let store = MemoryStore::new("mem://b");
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    let archive = WalArchive::new(&loc, SYSTEM);
    for n in 1..=segments {
        store.insert(
            &format!("{}00000001/{}.zst", archive.prefix(), segment(n).0),
            "w",
        );
    }
    assert!(store.list(archive.prefix()).await.is_err(), "past the cap");

    // A base backup waiting for its last three segments lists from them only.
    let needed: Vec<WalName> = (segments - 2..=segments + 1)
        .map(|n| WalName::parse(&segment(n).0).unwrap())
        .collect();
    let missing = crate::wal_range::missing(&store, &archive, &needed)
        .await
        .unwrap();
    assert_eq!(
        missing,
        [needed[3].clone()],
        "only the one not archived yet"
    );

    // The continuity check from a base backup near the start walks every page.
    let (start_name, start) = segment(10);
    let report = crate::continuity::check(
        &store,
        &loc,
        SYSTEM,
        &Default::default(),
        0,
        Some((1, start)),
    )
    .await
    .expect("a check past the cap");
    assert_eq!(report.first_segment.as_deref(), Some(start_name.as_str()));
    assert_eq!((report.segments, report.missing_count), (segments - 9, 0));

    // Retention deletes what the floor leaves behind, a page at a time.
    let floor = Floor {
        system_identifier: SYSTEM,
        start: segment(segments - 1000).1,
        segment_size: 16 << 20,
    };
    let deleted = delete_wal_before(&store, &loc, &floor).await.unwrap();
    assert_eq!(deleted as u64, segments - 1001);
    assert_eq!(store.keys().len(), 1001);
}
