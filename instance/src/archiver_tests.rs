use backup_store::store::memory::MemoryStore;

use super::*;

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
        let location = ClusterLocation::new("", "prod", "db").unwrap();
        Arc::new(Archiver::with_store(
            self.dir.path().to_owned(),
            Box::new(store.clone()),
            location,
        ))
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
    assert_eq!(pushed, Ok(Pushed::Stored));
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
            Ok(Pushed::Stored)
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
    assert_eq!(archiver.archive(path).await, Ok(Pushed::Stored));
    assert_eq!(archiver.archive(path).await, Ok(Pushed::AlreadyArchived));

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
        Ok(Pushed::Stored)
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
