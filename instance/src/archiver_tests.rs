use backup_store::store::memory::MemoryStore;

use std::sync::atomic::{AtomicU8, Ordering};

use super::*;
use crate::archive_socket::{serve, socket_path};
use tokio::net::UnixListener;

const SYSTEM: u64 = 7_400_000_000_000_000_001;

/// A data directory as far as the archiver reads one: the control file's system identifier,
/// and segments in `pg_wal`, each `.ready`.
struct DataDir {
    dir: tempfile::TempDir,
}

impl DataDir {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("global")).unwrap();
        let mut control = SYSTEM.to_ne_bytes().to_vec();
        control.resize(8192, 0);
        std::fs::write(dir.path().join("global/pg_control"), control).unwrap();
        std::fs::create_dir_all(dir.path().join("pg_wal/archive_status")).unwrap();
        Self { dir }
    }

    fn segment(&self, number: u32, fill: u8) -> String {
        let name = format!("0000000100000000{number:08X}");
        let mut bytes = vec![0u8; 1 << 20];
        bytes[..4096].fill(fill);
        std::fs::write(self.wal(&name), bytes).unwrap();
        std::fs::write(self.wal(&format!("archive_status/{name}.ready")), "").unwrap();
        name
    }

    fn wal(&self, name: &str) -> PathBuf {
        self.dir.path().join("pg_wal").join(name)
    }

    fn archiver(&self, store: &MemoryStore) -> Arc<Archiver> {
        self.archiver_on(store, &Arc::new(AtomicU8::new(30)))
    }

    /// An archiver on a volume as full as `used` says (percent).
    fn archiver_on(&self, store: &MemoryStore, used: &Arc<AtomicU8>) -> Arc<Archiver> {
        self.archiver_with(store, used, DiskPolicy::default())
    }

    fn archiver_with(
        &self,
        store: &MemoryStore,
        used: &Arc<AtomicU8>,
        policy: DiskPolicy,
    ) -> Arc<Archiver> {
        let location = ClusterLocation::new("", "prod", "db").unwrap();
        let used = used.clone();
        Arc::new(Archiver::with_store(
            self.dir.path().to_owned(),
            Box::new(store.clone()),
            location,
            policy,
            Box::new(move || Some(used.load(Ordering::Relaxed))),
        ))
    }
}

/// A disk policy for a bucket down longer than its minimum outage (none here): files give way
/// from the threshold at once.
fn long_outage() -> DiskPolicy {
    DiskPolicy {
        min_outage: std::time::Duration::ZERO,
        ..DiskPolicy::default()
    }
}

fn key(name: &str) -> String {
    format!("prod/db/wal/{SYSTEM}/00000001/{name}.zst")
}

#[tokio::test]
async fn a_segment_is_archived_under_the_system_and_the_next_ready_ones_ahead_of_their_turn() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let names: Vec<String> = (1..=6).map(|n| data.segment(n, n as u8)).collect();
    let archiver = data.archiver(&store);

    let first = data.wal(&names[0]);
    let pushed = archiver.archive(first.to_str().unwrap()).await;
    assert_eq!(pushed, Ok(Archived::Stored));
    assert!(store.keys().contains(&key(&names[0])));
    // Read ahead: the next ready files, at most IN_FLIGHT held (the first is answered).
    let ahead = lock(&archiver.uploads).len();
    assert!((1..=IN_FLIGHT).contains(&ahead), "{ahead} uploads ahead");
    for name in &names[1..] {
        // PostgreSQL marks the previous one done before it asks for the next.
        let _ = std::fs::remove_file(data.wal(&format!("archive_status/{name}.ready")));
        let path = data.wal(name);
        std::fs::write(data.wal(&format!("archive_status/{name}.ready")), "").unwrap();
        assert_eq!(
            archiver.archive(path.to_str().unwrap()).await,
            Ok(Archived::Stored)
        );
    }
    let mut expected: Vec<String> = names.iter().map(|n| key(n)).collect();
    expected.sort();
    assert_eq!(store.keys(), expected);
    assert_eq!(archiver.stats().archived, 6);
}

#[tokio::test]
async fn archiving_again_succeeds_and_other_bytes_under_the_name_are_refused() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let name = data.segment(1, 1);
    let archiver = data.archiver(&store);
    let path = data.wal(&name);
    let path = path.to_str().unwrap();
    assert_eq!(archiver.archive(path).await, Ok(Archived::Stored));
    assert_eq!(archiver.archive(path).await, Ok(Archived::AlreadyArchived));

    data.segment(1, 9);
    let refused = archiver.archive(path).await.unwrap_err();
    assert!(refused.contains("different contents"), "{refused}");
    let stats = archiver.stats();
    assert_eq!((stats.archived, stats.failed), (2, 1));
    assert_eq!(stats.last_failure.map(|f| f.0), Some(name));
}

#[tokio::test]
async fn only_wal_files_of_this_servers_pg_wal_are_taken() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let archiver = data.archiver(&store);
    let control = data.dir.path().join("global/pg_control");
    let refused = archiver.archive(control.to_str().unwrap()).await;
    assert!(refused.unwrap_err().contains("not a WAL file name"));

    let elsewhere = tempfile::tempdir().unwrap();
    let forged = elsewhere.path().join("000000010000000000000001");
    std::fs::write(&forged, "secrets").unwrap();
    let refused = archiver.archive(forged.to_str().unwrap()).await;
    assert!(refused.unwrap_err().contains("not in this server's pg_wal"));
    assert!(store.keys().is_empty());
}

#[tokio::test]
async fn a_store_that_is_down_fails_the_request_and_the_next_one_tries_again() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let name = data.segment(1, 1);
    let archiver = data.archiver(&store);
    let path = data.wal(&name);
    store.set_unreachable(true);
    assert!(archiver.archive(path.to_str().unwrap()).await.is_err());
    assert!(archiver.stats().failing());
    let status = archiver.status();
    assert_eq!((status.failed_count, status.pending), (1, 1));
    assert!(status.last_error.is_some_and(|e| !e.is_empty()));
    store.set_unreachable(false);
    assert_eq!(
        archiver.archive(path.to_str().unwrap()).await,
        Ok(Archived::Stored)
    );
    assert!(!archiver.stats().failing());
}

#[tokio::test]
async fn the_hook_is_answered_over_the_socket() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let name = data.segment(1, 1);
    let archiver = data.archiver(&store);
    let run = tempfile::tempdir().unwrap();
    let listener = UnixListener::bind(socket_path(run.path())).unwrap();
    tokio::spawn(serve(listener, archiver));
    let (wal, run_dir) = (data.wal(&name), run.path().to_owned());
    let hook = move |file: PathBuf| {
        let run_dir = run_dir.clone();
        tokio::task::spawn_blocking(move || {
            crate::wal_push::push(&file, &run_dir, std::time::Duration::from_secs(10))
        })
    };
    assert_eq!(hook(wal.clone()).await.unwrap(), Ok("stored".to_owned()));
    assert_eq!(hook(wal).await.unwrap(), Ok("already-archived".to_owned()));
    let refused = hook(PathBuf::from("/etc/passwd")).await.unwrap();
    assert!(refused.unwrap_err().contains("not a WAL file name"));
}

#[tokio::test]
async fn a_full_volume_gives_way_and_the_bucket_gets_the_gap_marker_when_it_answers() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let names: Vec<String> = (1..=3).map(|n| data.segment(n, n as u8)).collect();
    let used = Arc::new(AtomicU8::new(79));
    let archiver = data.archiver_with(&store, &used, long_outage());
    let path = |n: usize| data.wal(&names[n]).to_str().unwrap().to_owned();
    store.set_unreachable(true);

    // Below the threshold the file is kept: PostgreSQL retries it.
    assert!(archiver.archive(&path(0)).await.is_err());
    assert_eq!(archiver.status().gap, None);

    // From it, the file is released unarchived, and so is the next one (untried: the bucket
    // failed moments ago).
    used.store(85, Ordering::Relaxed);
    assert_eq!(archiver.archive(&path(0)).await, Ok(Archived::GaveWay));
    let failed = archiver.stats().failed;
    assert_eq!(archiver.archive(&path(1)).await, Ok(Archived::GaveWay));
    assert_eq!(archiver.stats().failed, failed, "given way untried");
    let status = archiver.status();
    assert_eq!(
        (status.gave_way_count, status.volume_used_percent),
        (2, Some(85))
    );
    let gap = status.gap.expect("an open gap");
    assert_eq!(
        (gap.first_segment.as_deref(), gap.last_segment.as_deref()),
        (Some(names[0].as_str()), Some(names[1].as_str()))
    );
    assert_eq!(
        (gap.files, gap.closed_at, gap.system_identifier),
        (2, None, SYSTEM.to_string())
    );
    // Kept on the volume: a restarted manager still knows the gap.
    let restarted = data.archiver_with(&store, &used, long_outage());
    assert_eq!(restarted.status().gap.map(|g| g.files), Some(2));
    drop(restarted);

    // The volume recycled WAL and the bucket answers: the next file is archived, the gap
    // closes, and its marker is in the bucket, not on the volume any more.
    used.store(60, Ordering::Relaxed);
    store.set_unreachable(false);
    for name in &names[..2] {
        // PostgreSQL marked the released files done.
        std::fs::remove_file(data.wal(&format!("archive_status/{name}.ready"))).unwrap();
    }
    assert_eq!(archiver.archive(&path(2)).await, Ok(Archived::Stored));
    let marker = format!("prod/db/wal/{SYSTEM}/gaps/{}-{}.json", names[0], names[1]);
    assert!(store.keys().contains(&marker), "{:?}", store.keys());
    assert!(!store.keys().contains(&key(&names[0])));
    let closed = archiver.status().gap.expect("the last gap");
    assert!(closed.closed_at.is_some());
    let left = std::fs::read_dir(crate::archive_gap::gaps_dir(data.dir.path())).unwrap();
    assert_eq!(left.count(), 0);
}

#[tokio::test]
async fn one_failed_upload_on_a_full_volume_keeps_the_file() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let name = data.segment(1, 1);
    let archiver = data.archiver_on(&store, &Arc::new(AtomicU8::new(95)));
    store.set_unreachable(true);
    let path = data.wal(&name).to_str().unwrap().to_owned();
    assert!(
        archiver.archive(&path).await.is_err(),
        "a hiccup, not an outage: PostgreSQL keeps the file and retries it"
    );
    assert_eq!(archiver.status().gave_way_count, 0);
    assert_eq!(archiver.status().gap, None);
    store.set_unreachable(false);
    assert_eq!(archiver.archive(&path).await, Ok(Archived::Stored));
}

#[tokio::test]
async fn a_conflict_never_gives_way_however_full_the_volume() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let name = data.segment(1, 1);
    let archiver = data.archiver_with(&store, &Arc::new(AtomicU8::new(99)), long_outage());
    // Another server archived other bytes under the same name (a split brain).
    let theirs = data.archiver(&store);
    let path = data.wal(&name).to_str().unwrap().to_owned();
    assert_eq!(theirs.archive(&path).await, Ok(Archived::Stored));
    assert_eq!(data.segment(1, 9), name, "the same name, other bytes");
    let refused = archiver.archive(&path).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("different contents")),
        "{refused:?}"
    );
    assert_eq!(archiver.status().gave_way_count, 0);
    // Its own state in /status (it showed only as failing), until a file is archived.
    assert_eq!(archiver.status().conflict.as_deref(), Some(name.as_str()));
    let next = data.segment(2, 2);
    let next_path = data.wal(&next).to_str().unwrap().to_owned();
    assert_eq!(archiver.archive(&next_path).await, Ok(Archived::Stored));
    assert_eq!(archiver.status().conflict, None);
}

#[tokio::test]
async fn at_100_percent_the_archive_never_gives_way() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let name = data.segment(1, 1);
    let location = ClusterLocation::new("", "prod", "db").unwrap();
    let archiver = Arc::new(Archiver::with_store(
        data.dir.path().to_owned(),
        Box::new(store.clone()),
        location,
        DiskPolicy {
            gap_at: 100,
            ..DiskPolicy::default()
        },
        Box::new(|| Some(100)),
    ));
    store.set_unreachable(true);
    assert!(
        archiver
            .archive(data.wal(&name).to_str().unwrap())
            .await
            .is_err()
    );
    assert_eq!(archiver.status().gave_way_count, 0);
}

/// A gap opened just before a failover: the demoted server's manager uploads its marker once
/// the bucket answers it as a standby (issue 46, low: it stayed on the old primary's volume
/// until that server was primary again, and the new primary's checks saw holes, not a gap).
#[tokio::test]
async fn a_gap_opened_before_a_demotion_reaches_the_bucket_from_the_standby() {
    let data = DataDir::new();
    let store = MemoryStore::default();
    let names: Vec<String> = (1..=2).map(|n| data.segment(n, n as u8)).collect();
    let used = Arc::new(AtomicU8::new(85));
    let archiver = data.archiver_with(&store, &used, long_outage());
    let path = |n: usize| data.wal(&names[n]).to_str().unwrap().to_owned();
    store.set_unreachable(true);
    assert_eq!(archiver.archive(&path(0)).await, Ok(Archived::GaveWay));
    assert!(archiver.status().gap.is_some_and(|g| g.closed_at.is_none()));

    // Demoted; the new primary archived segment 2, and the bucket answers again.
    std::fs::write(data.dir.path().join("standby.signal"), "").unwrap();
    used.store(60, Ordering::Relaxed);
    store.set_unreachable(false);
    let stored = wal::push_file(
        &store,
        &WalArchive::new(&ClusterLocation::new("", "prod", "db").unwrap(), SYSTEM),
        &WalName::parse(&names[1]).unwrap(),
        &data.wal(&names[1]),
    )
    .await;
    assert!(stored.is_ok(), "{stored:?}");
    assert_eq!(archiver.archive(&path(1)).await, Ok(Archived::ByPrimary));
    let marker = format!("prod/db/wal/{SYSTEM}/gaps/{}-{}.json", names[0], names[0]);
    assert!(store.keys().contains(&marker), "{:?}", store.keys());
    assert!(archiver.status().gap.is_some_and(|g| g.closed_at.is_some()));
}
