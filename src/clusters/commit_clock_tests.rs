//! The newest commit of an archive, read back from segments in a store.

use backup_store::store::ObjectStore as _;
use backup_store::store::memory::MemoryStore;
use tusk_testkit::wal::{commit, other, segment};

use super::*;

const PAGE: usize = 8192;
const SIZE: usize = 1 << 20;

fn listed(names: &[&str]) -> Vec<ObjectInfo> {
    (names.iter())
        .map(|name| ObjectInfo {
            key: format!("p/ns/db/wal/7/{}/{name}.zst", &name[..8]),
            size: 1,
            last_modified: None,
        })
        .collect()
}

#[test]
fn the_newest_position_first_and_the_newest_timeline_at_a_position() {
    let wal = listed(&[
        "000000010000000000000003",
        "000000010000000000000004",
        "000000020000000000000004",
        "000000020000000000000005",
        "000000010000000000000004.partial",
    ]);
    assert_eq!(
        newest_first(&wal),
        [
            "000000020000000000000005",
            "000000020000000000000004",
            "000000010000000000000003"
        ]
    );
}

#[tokio::test]
async fn segments_are_read_back_until_one_holds_a_commit() {
    let store = MemoryStore::new("memory://test");
    let location = ClusterLocation::new("p", "ns", "db").unwrap();
    let archive = WalArchive::new(&location, 7);
    let stamped = 1_795_000_000_000_000; // 2026-11-18
    let with_commit = segment(PAGE, SIZE, 0x0300_0000, 0, &[other(50), commit(stamped, 0)]);
    let without = segment(PAGE, SIZE, 0x0400_0000, 0, &[other(50), other(60)]);
    let mut names = Vec::new();
    for (name, bytes) in [
        ("000000010000000000000003", &with_commit),
        ("000000010000000000000004", &without),
        ("000000010000000000000005", &without),
    ] {
        let file = WalName::parse(name).unwrap();
        wal::push(&store, &archive, &file, bytes).await.unwrap();
        names.push(name);
    }
    let clock = read(&store, &location, 7, &listed(&names)).await.unwrap();
    let expected = NewestCommit {
        at: Timestamp::from_microsecond(stamped).unwrap(),
        segment: "000000010000000000000003".into(),
    };
    assert_eq!(clock, Clock::Commit(expected));
    // Stand-ins that are not WAL, or more segments without a commit than are read: unknown.
    let stand_in = WalName::parse("000000010000000000000006").unwrap();
    wal::push(&store, &archive, &stand_in, b"not wal")
        .await
        .unwrap();
    names.push("000000010000000000000006");
    // Not zstd at all (the day-30 generator's stand-ins): skipped, not an error.
    let raw = "p/ns/db/wal/7/00000001/000000010000000000000007.zst";
    store
        .put(raw, bytes::Bytes::from_static(b"w"))
        .await
        .unwrap();
    names.push("000000010000000000000007");
    let only_newest = &listed(&names)[3..];
    assert_eq!(
        read(&store, &location, 7, only_newest).await.unwrap(),
        Clock::Unknown
    );
}
