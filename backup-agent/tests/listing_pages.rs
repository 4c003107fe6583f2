//! Paged listings on the real stores (MinIO, the GCS emulator): one page per request, resumed
//! after a key, jumping over the WAL archive; what the catalog and `onDelete: Delete` use so
//! that their cost does not grow with the archive's age (a store's listing of the whole prefix
//! is capped at 100,000 objects, reached on day 6 at the 5 s `archive_timeout`).

mod common;

use backup_store::catalog::{self, WAL_FOLDER};
use backup_store::layout::ClusterLocation;
use backup_store::store::{self, LIST_PAGE};
use bytes::Bytes;
use common::stores::{Kind, TestStore};

/// WAL files under the cluster's archive: more than two pages.
const SEGMENTS: usize = 2 * LIST_PAGE + 300;

async fn prefix_with_archive(kind: Kind) -> (TestStore, ClusterLocation) {
    let test = TestStore::start(kind).await;
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    let wal = loc.wal_prefix(7);
    // Objects of backups either side of `wal/` in key order (no manifests: incomplete ones).
    for key in ["base-1/a", "base-1/b", "zz-last/a"] {
        let key = format!("{}{key}", loc.prefix());
        test.store
            .put(&key, Bytes::from_static(b"b"))
            .await
            .unwrap();
    }
    let puts = (0..SEGMENTS).map(|n| {
        let key = format!("{wal}00000001/00000001{n:016X}.zst");
        let store = &test.store;
        async move { store.put(&key, Bytes::from_static(b"w")).await.unwrap() }
    });
    futures::future::join_all(puts).await;
    (test, loc)
}

async fn pages_and_cleanup(kind: Kind) {
    let (test, loc) = prefix_with_archive(kind).await;
    let store = test.store.as_ref();

    let first = store.list_page(&loc.wal_prefix(7), None).await.unwrap();
    assert_eq!(first.len(), LIST_PAGE, "{kind:?}: one page");
    let after = first.last().map(|o| o.key.clone()).unwrap();
    let second = store
        .list_page(&loc.wal_prefix(7), Some(&after))
        .await
        .unwrap();
    assert!(second[0].key > after, "{kind:?}: resumed after {after}");
    assert_eq!(second.len(), LIST_PAGE);

    let mut seen = Vec::new();
    let mut pages = store::Pager::new(store, &loc.prefix(), &[WAL_FOLDER]);
    while let Some(page) = pages.next().await.unwrap() {
        seen.extend(page.into_iter().map(|o| o.key));
    }
    let requests = pages.requests;
    let base = loc.prefix();
    let expected: Vec<String> = ["base-1/a", "base-1/b", "zz-last/a"]
        .iter()
        .map(|k| format!("{base}{k}"))
        .collect();
    assert_eq!(seen, expected, "{kind:?}: the backups, none of the archive");
    assert!(
        requests <= 3,
        "{kind:?}: {requests} list requests past {SEGMENTS} WAL files"
    );

    let deleted = catalog::delete_wal(store, &loc, 7).await.unwrap();
    assert_eq!(
        deleted, SEGMENTS,
        "{kind:?}: every WAL file, a page at a time"
    );
    assert!(store.list(&loc.wal_prefix(7)).await.unwrap().is_empty());
}

#[tokio::test]
async fn minio_pages_resume_after_a_key_and_skip_the_archive() {
    pages_and_cleanup(Kind::Minio).await;
}

#[tokio::test]
async fn gcs_pages_resume_after_a_key_and_skip_the_archive() {
    pages_and_cleanup(Kind::Gcs).await;
}
