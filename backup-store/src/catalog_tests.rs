//! Ownership rules of the catalog on an in-memory bucket: shared prefixes (issue 12, defect 8).

use bytes::Bytes;

use super::*;
use crate::claim::{self, Claim};
use crate::compression::Compression;
use crate::prune::prune;
use crate::retention::Policy;
use crate::store::PendingUpload;
use crate::store::memory::MemoryStore;

const US: &str = "uid-us";
const PEER: &str = "uid-peer";

fn at(days_ago: i64) -> jiff::Timestamp {
    let now: jiff::Timestamp = "2026-11-23T00:00:00Z".parse().unwrap();
    now - jiff::SignedDuration::from_hours(24 * days_ago)
}

fn manifest(loc: &ClusterLocation, id: &str, owner: Option<&str>, days_ago: i64) -> Manifest {
    Manifest {
        format_version: crate::manifest::FORMAT_VERSION,
        backup_id: id.into(),
        namespace: loc.namespace().into(),
        cluster: loc.cluster().into(),
        cluster_uid: owner.map(str::to_owned),
        started_at: at(days_ago),
        completed_at: at(days_ago),
        server_version: "15".into(),
        pg_dump_version: "pg_dump (PostgreSQL) 15".into(),
        compression: Compression::None,
        files: Vec::new(),
        physical: None,
    }
}

/// A complete backup `id` owned by `owner`, with one dump file.
async fn backup(
    store: &MemoryStore,
    loc: &ClusterLocation,
    id: &str,
    owner: Option<&str>,
    age: i64,
) {
    let m = manifest(loc, id, owner, age);
    let json = Bytes::from(m.to_json().unwrap());
    store.put(&loc.manifest_key(id), json).await.unwrap();
    let dump = loc.object_key(id, "db-app.pgdump");
    store.put(&dump, Bytes::from_static(b"x")).await.unwrap();
}

/// The manifest of our base backup `id`, completed `days_ago` (the older, the earlier its WAL).
async fn base_backup(store: &MemoryStore, loc: &ClusterLocation, id: &str, days_ago: i64) {
    let mut base = manifest(loc, id, Some(US), days_ago);
    let segment = 20 - days_ago;
    base.physical = Some(crate::manifest::PhysicalBackup {
        system_identifier: "7".into(),
        timeline: 1,
        start_lsn: format!("0/{segment:X}000028"),
        stop_lsn: format!("0/{segment:X}000100"),
        wal_segment_size: None,
    });
    let json = Bytes::from(base.to_json().unwrap());
    store.put(&loc.manifest_key(id), json).await.unwrap();
}

fn run_of(owner: &str, writer: &str) -> Claim {
    Claim {
        cluster_uid: Some(owner.into()),
        writer: Some(writer.into()),
        claimed_at: at(0),
    }
}

/// Claims backup id `id` at `loc` for `owner`'s run `writer`; panics when it is taken.
async fn claim_run(
    store: &MemoryStore,
    loc: &ClusterLocation,
    id: &str,
    owner: &str,
    writer: &str,
) {
    claim::claim(store, loc, id, &run_of(owner, writer))
        .await
        .unwrap();
}

/// Opens an upload of a dump for each (location, backup id) and returns their keys.
fn open_dump_uploads(store: &MemoryStore, runs: &[(&ClusterLocation, &str)]) -> Vec<String> {
    let keys: Vec<String> = runs
        .iter()
        .map(|(loc, id)| loc.object_key(id, "db-app.pgdump"))
        .collect();
    store.open_uploads(keys.iter().map(|key| PendingUpload {
        key: key.clone(),
        upload_id: "u".into(),
        initiated: Some(at(1)),
    }));
    keys
}

fn ids(keys: &[String], loc: &ClusterLocation) -> Vec<String> {
    let mut ids: Vec<String> = keys
        .iter()
        .filter_map(|k| loc.parse_key(k).map(|(id, _)| id.to_owned()))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

#[tokio::test]
async fn retention_counts_and_deletes_only_our_backups() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    // The other side of a DR pair writes newer backups to the same prefix.
    backup(&store, &loc, "ours-old", Some(US), 3).await;
    backup(&store, &loc, "ours-new", Some(US), 2).await;
    backup(&store, &loc, "peer-old", Some(PEER), 1).await;
    backup(&store, &loc, "peer-new", Some(PEER), 0).await;
    let policy = Policy {
        keep: Some(1),
        max_age: None,
        recovery_window: None,
    };
    let report = prune(&store, &loc, &Owner::new(Some(US)), policy, at(0))
        .await
        .unwrap();
    assert_eq!(report.deleted, ["ours-old"]);
    assert_eq!(report.not_ours, ["peer-old", "peer-new"]);
    assert_eq!(
        ids(&store.keys(), &loc),
        ["ours-new", "peer-new", "peer-old"]
    );
}

#[tokio::test]
async fn keep_and_max_age_count_logical_backups_and_leave_base_backups() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    base_backup(&store, &loc, "base-old", 9).await;
    backup(&store, &loc, "dump-old", Some(US), 8).await;
    backup(&store, &loc, "dump-new", Some(US), 1).await;
    let policy = Policy {
        keep: Some(1),
        max_age: Some(std::time::Duration::from_secs(2 * 86_400)),
        recovery_window: None,
    };
    let report = prune(&store, &loc, &Owner::new(Some(US)), policy, at(0))
        .await
        .unwrap();
    assert_eq!(report.deleted, ["dump-old"]);
    assert_eq!(ids(&store.keys(), &loc), ["base-old", "dump-new"]);
}

#[tokio::test]
async fn a_restore_to_a_time_starts_from_the_newest_base_backup_completed_by_then() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    base_backup(&store, &loc, "base-old", 5).await;
    base_backup(&store, &loc, "base-new", 1).await;
    let pick = |id: &'static str, days_ago| {
        let (store, loc) = (&store, &loc);
        let bound = Some(Bound::CompletedBy(at(days_ago)));
        async move { resolve_before(store, loc, id, Some(Method::Physical), bound).await }
    };
    assert_eq!(pick("latest", 3).await.unwrap().backup_id, "base-old");
    assert_eq!(pick("latest", 0).await.unwrap().backup_id, "base-new");
    let none = pick("latest", 6).await.unwrap_err().to_string();
    assert!(none.contains("completed by"), "{none}");
    let late = pick("base-new", 3).await.unwrap_err().to_string();
    assert!(late.contains("after the target"), "{late}");
}

#[tokio::test]
async fn a_restore_to_an_lsn_starts_from_the_newest_base_backup_consistent_by_then() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    base_backup(&store, &loc, "base-old", 5).await;
    base_backup(&store, &loc, "base-new", 1).await;
    let stop = |m: Manifest| crate::lsn::Lsn::parse(&m.physical.unwrap().stop_lsn).unwrap();
    let old = stop(resolve(&store, &loc, "base-old", None).await.unwrap());
    let new = stop(resolve(&store, &loc, "base-new", None).await.unwrap());
    assert!(old < new, "{old} {new}");
    let pick = |lsn: crate::lsn::Lsn| {
        let (store, loc) = (&store, &loc);
        let bound = Some(Bound::ConsistentBy(lsn));
        async move { resolve_before(store, loc, "latest", Some(Method::Physical), bound).await }
    };
    assert_eq!(pick(new).await.unwrap().backup_id, "base-new");
    assert_eq!(
        pick(crate::lsn::Lsn(new.0 - 1)).await.unwrap().backup_id,
        "base-old"
    );
    let none = pick(crate::lsn::Lsn(old.0 - 1))
        .await
        .unwrap_err()
        .to_string();
    assert!(none.contains("consistent by"), "{none}");
}

#[tokio::test]
async fn a_recreated_cluster_keeps_the_backup_it_was_restored_from() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("", "ns", "db").unwrap();
    // The predecessor (same name, another uid) and one from before identities were recorded.
    backup(&store, &loc, "predecessor", Some("uid-old"), 10).await;
    backup(&store, &loc, "restored", None, 9).await;
    backup(&store, &loc, "unmarked", None, 8).await;
    for (id, age) in [("b1", 3), ("b2", 2), ("b3", 1)] {
        backup(&store, &loc, id, Some(US), age).await;
    }
    let owner = Owner::new(Some(US)).protecting("restored");
    let policy = Policy {
        keep: Some(1),
        max_age: None,
        recovery_window: None,
    };
    let report = prune(&store, &loc, &owner, policy, at(0)).await.unwrap();
    assert_eq!(report.deleted, ["unmarked", "b1", "b2"]);
    assert_eq!(ids(&store.keys(), &loc), ["b3", "predecessor", "restored"]);
}

#[tokio::test]
async fn delete_spares_nested_clusters_other_owners_and_the_restored_backup() {
    let store = MemoryStore::default();
    // A: path p, ns n, name c -> p/n/c/. B: path p/n/c, ns x, name y -> p/n/c/x/y/.
    let a = ClusterLocation::new("p", "n", "c").unwrap();
    let b = ClusterLocation::new("p/n/c", "x", "y").unwrap();
    backup(&store, &b, "b-backup", Some(PEER), 1).await;
    backup(&store, &a, "ours", Some(US), 1).await;
    backup(&store, &a, "legacy", None, 2).await;
    backup(&store, &a, "peer", Some(PEER), 1).await;
    backup(&store, &a, "restored", None, 5).await;
    // In progress: our claim, and a peer's claim with its upload open.
    claim_run(&store, &a, "ours-running", US, "job-1").await;
    claim_run(&store, &a, "peer-running", PEER, "job-9").await;
    let pending = open_dump_uploads(
        &store,
        &[
            (&a, "ours-running"),
            (&a, "peer-running"),
            (&b, "b-running"),
        ],
    );
    let mut stray = a.prefix();
    stray.push_str("README");
    store.put(&stray, Bytes::from_static(b"hi")).await.unwrap();

    let owner = Owner::new(Some(US)).protecting("restored");
    let done = delete_cluster(&store, &a, &owner).await.unwrap();

    assert_eq!(done.kept, ["peer", "peer-running", "restored"]);
    let left = store.keys();
    assert_eq!(ids(&left, &a), ["peer", "peer-running", "restored"]);
    assert_eq!(
        ids(&left, &b),
        ["b-backup"],
        "the nested cluster keeps its backup"
    );
    assert!(left.contains(&stray), "only backup directories are deleted");
    let open = store.open_upload_keys();
    assert_eq!(open, pending[1..], "only our own upload is aborted");
}

#[tokio::test]
async fn retention_leaves_nested_and_foreign_uploads_alone() {
    let store = MemoryStore::default();
    let a = ClusterLocation::new("p", "n", "c").unwrap();
    let b = ClusterLocation::new("p/n/c", "x", "y").unwrap();
    claim_run(&store, &a, "peer-running", PEER, "job-9").await;
    let pending = open_dump_uploads(
        &store,
        &[(&a, "killed"), (&a, "peer-running"), (&b, "b-running")],
    );
    let report = prune(&store, &a, &Owner::new(Some(US)), Policy::default(), at(0))
        .await
        .unwrap();
    assert_eq!(report.aborted_uploads, 1);
    let open = store.open_upload_keys();
    assert_eq!(open, pending[1..]);
}

#[tokio::test]
async fn a_second_writer_of_an_id_fails_before_writing() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    claim_run(&store, &loc, "b1", US, "job-1").await;
    // The same Job's next pod takes its own claim over.
    claim_run(&store, &loc, "b1", US, "job-1").await;
    for other in [
        run_of(PEER, "job-1"),
        run_of(US, "job-2"),
        Claim {
            cluster_uid: Some(US.into()),
            writer: None,
            claimed_at: at(0),
        },
    ] {
        let err = claim::claim(&store, &loc, "b1", &other).await.unwrap_err();
        assert!(
            matches!(err, CatalogError::IdTaken { .. }),
            "{other:?}: {err}"
        );
        let message = err.to_string();
        assert!(message.contains("s3://memory/p/ns/db/b1/"), "{message}");
        assert!(message.contains(US), "names the holder: {message}");
    }
}

#[tokio::test]
async fn a_manifest_is_never_replaced() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("p", "ns", "db").unwrap();
    let first = manifest(&loc, "b1", Some(US), 1);
    claim::create_manifest(&store, &loc, &first).await.unwrap();
    // Our own write retried by a client finds our bytes: fine.
    claim::create_manifest(&store, &loc, &first).await.unwrap();
    let second = manifest(&loc, "b1", Some(PEER), 0);
    let err = claim::create_manifest(&store, &loc, &second)
        .await
        .unwrap_err();
    assert!(matches!(err, CatalogError::IdTaken { .. }), "{err}");
    let stored = crate::store::get_bytes(&store, &loc.manifest_key("b1"))
        .await
        .unwrap();
    assert_eq!(Manifest::from_json(&stored).unwrap(), first);
}

#[tokio::test]
async fn latest_is_the_newest_backup_of_the_method_asked_for_and_an_id_must_match_it() {
    let store = MemoryStore::default();
    let loc = ClusterLocation::new("", "prod", "db").unwrap();
    backup(&store, &loc, "dump", Some(US), 2).await;
    base_backup(&store, &loc, "base", 1).await;

    let latest = |method| resolve(&store, &loc, "latest", method);
    assert_eq!(latest(None).await.unwrap().backup_id, "base");
    let logical = latest(Some(Method::Logical)).await.unwrap();
    assert_eq!(logical.backup_id, "dump");
    let physical = latest(Some(Method::Physical)).await.unwrap();
    assert_eq!(physical.backup_id, "base");

    let wrong = resolve(&store, &loc, "base", Some(Method::Logical)).await;
    let message = wrong.unwrap_err().to_string();
    assert!(
        message.contains("base is a physical backup, not a logical one"),
        "{message}"
    );
    let empty = MemoryStore::default();
    let none = resolve(&empty, &loc, "latest", Some(Method::Physical)).await;
    assert!(
        none.unwrap_err()
            .to_string()
            .contains("no complete physical backup")
    );
}
