use crate::store::memory::MemoryStore;

use super::*;

fn archive() -> WalArchive {
    let location = ClusterLocation::new("nightly", "prod", "db").unwrap();
    WalArchive::new(&location, 7_312_345_678_901_234_567)
}

fn segment(fill: u8) -> Vec<u8> {
    // A WAL segment is mostly zeros after its last record.
    let mut bytes = vec![0; 1 << 20];
    bytes[..4096].fill(fill);
    bytes
}

#[test]
fn only_names_postgresql_archives_are_keys_and_each_has_its_place() {
    let archive = archive();
    let key = |name: &str| archive.key(&WalName::parse(name).unwrap());
    let base = "nightly/prod/db/wal/7312345678901234567/";
    assert_eq!(
        key("000000010000000000000003"),
        format!("{base}00000001/000000010000000000000003.zst")
    );
    assert_eq!(
        key("000000020000000000000003.partial"),
        format!("{base}00000002/000000020000000000000003.partial.zst")
    );
    assert_eq!(
        key("000000010000000000000003.00000028.backup"),
        format!("{base}00000001/000000010000000000000003.00000028.backup.zst")
    );
    assert_eq!(
        key("00000002.history"),
        format!("{base}history/00000002.history.zst")
    );
    for refused in [
        "",
        "00000001000000000000003",
        "0000000100000000000000030",
        "000000010000000000000003.zst",
        "00000001000000000000000g",
        "../../../../etc/passwd00",
        "000000010000000000000003.0000002.backup",
        "0000002.history",
        "000000010000000000000003/x",
    ] {
        assert!(WalName::parse(refused).is_err(), "{refused:?}");
    }
}

#[tokio::test]
async fn a_pushed_segment_is_fetched_back_byte_for_byte_and_stored_compressed() {
    let store = MemoryStore::new("memory");
    let archive = archive();
    let name = WalName::parse("000000010000000000000003").unwrap();
    let contents = segment(7);
    assert_eq!(
        push(&store, &archive, &name, &contents).await.unwrap(),
        Pushed::Stored
    );
    let stored = store::get_bytes(&store, &archive.key(&name)).await.unwrap();
    assert!(stored.len() < contents.len() / 10, "{}", stored.len());
    let fetched = fetch(&store, &archive, &name).await.unwrap().unwrap();
    assert_eq!(fetched, contents);
}

#[tokio::test]
async fn the_same_bytes_again_succeed_and_different_bytes_are_refused_and_kept_out() {
    let store = MemoryStore::new("memory");
    let archive = archive();
    let name = WalName::parse("000000010000000000000003").unwrap();
    push(&store, &archive, &name, &segment(1)).await.unwrap();
    assert_eq!(
        push(&store, &archive, &name, &segment(1)).await.unwrap(),
        Pushed::AlreadyArchived,
        "PostgreSQL archives a file again after a crash"
    );
    let refused = push(&store, &archive, &name, &segment(2))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, WalError::Conflict { name, .. } if name == "000000010000000000000003"),
        "{refused}"
    );
    let kept = fetch(&store, &archive, &name).await.unwrap().unwrap();
    assert_eq!(kept, segment(1), "never overwritten");
}

#[tokio::test]
async fn another_system_never_sees_or_touches_this_ones_wal() {
    let store = MemoryStore::new("memory");
    let location = ClusterLocation::new("nightly", "prod", "db").unwrap();
    let (first, second) = (WalArchive::new(&location, 1), WalArchive::new(&location, 2));
    let name = WalName::parse("000000010000000000000001").unwrap();
    push(&store, &first, &name, &segment(1)).await.unwrap();
    assert_eq!(fetch(&store, &second, &name).await.unwrap(), None);
    assert_eq!(
        push(&store, &second, &name, &segment(2)).await.unwrap(),
        Pushed::Stored,
        "a re-created cluster starts its own archive"
    );
    assert_eq!(
        fetch(&store, &first, &name).await.unwrap().unwrap(),
        segment(1)
    );
}

#[tokio::test]
async fn only_a_real_not_found_is_absent_a_store_failure_and_damage_are_errors() {
    let store = MemoryStore::new("memory");
    let archive = archive();
    let name = WalName::parse("000000010000000000000009").unwrap();
    assert_eq!(fetch(&store, &archive, &name).await.unwrap(), None);

    store.set_unreachable(true);
    let down = fetch(&store, &archive, &name).await.unwrap_err();
    assert!(matches!(down, WalError::Store(_)), "{down}");
    store.set_unreachable(false);

    push(&store, &archive, &name, &segment(3)).await.unwrap();
    let key = archive.key(&name);
    let mut stored = store::get_bytes(&store, &key).await.unwrap();
    let middle = stored.len() / 2;
    stored[middle] ^= 0xff;
    store.insert(&key, stored);
    let damaged = fetch(&store, &archive, &name).await.unwrap_err();
    assert!(matches!(damaged, WalError::Damaged { .. }), "{damaged}");
}

#[test]
fn the_system_identifier_is_read_from_the_control_file() {
    let pgdata = tempfile::tempdir().unwrap();
    std::fs::create_dir(pgdata.path().join("global")).unwrap();
    let mut control = 7_312_345_678_901_234_567_u64.to_ne_bytes().to_vec();
    control.extend([0; 100]);
    std::fs::write(pgdata.path().join("global/pg_control"), control).unwrap();
    assert_eq!(
        system_identifier(pgdata.path()).unwrap(),
        7_312_345_678_901_234_567
    );
    let missing = system_identifier(&pgdata.path().join("nowhere")).unwrap_err();
    assert!(missing.to_string().contains("pg_control"), "{missing}");
}
