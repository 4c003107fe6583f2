//! Unit tests of the restore's prefetch: segment arithmetic, and the spool with a fake download.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

const MIB16: u64 = 16 << 20;

#[test]
fn the_next_segment_rolls_over_into_the_next_log_file() {
    let next = |name, size| next_segment(name, size);
    assert_eq!(
        next("000000020000000100000003", MIB16).as_deref(),
        Some("000000020000000100000004")
    );
    assert_eq!(
        next("0000000100000001000000FF", MIB16).as_deref(),
        Some("000000010000000200000000")
    );
    // 64 MiB segments: 64 per log file.
    assert_eq!(
        next("00000001000000010000003F", 64 << 20).as_deref(),
        Some("000000010000000200000000")
    );
    for other in [
        "00000002.history",
        "000000010000000100000003.partial",
        "short",
    ] {
        assert_eq!(next(other, MIB16), None, "{other}");
    }
    assert_eq!(next("000000010000000100000003", 3 << 20), None);
}

/// A download that writes the file's own name into it, except for `missing`; counts its calls.
fn fake(missing: &'static str, calls: Arc<AtomicUsize>) -> Download {
    Arc::new(move |name: String, path: PathBuf| {
        calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { name != missing && std::fs::write(&path, &name).is_ok() })
    })
}

/// A segment PostgreSQL received: a file of the segment size in `pg_wal`.
fn received(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(MIB16).unwrap();
    path
}

#[tokio::test]
async fn the_next_segments_are_spooled_once_and_handed_over_by_rename() {
    let dir = tempfile::tempdir().unwrap();
    let pg_wal = dir.path().join("pg_wal");
    std::fs::create_dir(&pg_wal).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let missing = "000000010000000000000004";
    let spool = spool_dir(&dir.path().join("pgdata"));
    let prefetcher = Prefetcher::new(spool.clone(), fake(missing, calls.clone())).unwrap();

    // A history file first (a source that failed over): it teaches nothing about segments.
    let history = pg_wal.join("RECOVERYHISTORY");
    std::fs::write(&history, "1\t0/3000000\tno recovery target specified\n").unwrap();
    prefetcher.ahead_of("00000002.history", &history);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let first = received(&pg_wal, "000000010000000000000001");
    prefetcher.ahead_of("000000010000000000000001", &first);
    // Asked again before the downloads end: nothing is fetched twice.
    prefetcher.ahead_of("000000010000000000000001", &first);

    let target = pg_wal.join("RECOVERYXLOG");
    assert!(prefetcher.take("000000010000000000000002", &target).await);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "000000010000000000000002"
    );
    assert!(
        !spool.join("000000010000000000000002").exists(),
        "moved, not copied"
    );
    assert!(prefetcher.take("000000010000000000000003", &target).await);
    // Not in the archive: forgotten, so PostgreSQL's own request decides.
    assert!(!prefetcher.take(missing, &target).await);
    assert!(!prefetcher.take("000000010000000000000009", &target).await);
    assert_eq!(calls.load(Ordering::SeqCst), AHEAD as usize);
}
