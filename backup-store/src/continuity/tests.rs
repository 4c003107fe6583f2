use super::*;
use first_page::LONG_HEADER;

const MIB16: u64 = 16 << 20;
const PREFIX: &str = "p/ns/db/wal/7/";

fn lsn(text: &str) -> Lsn {
    Lsn::parse(text).unwrap()
}

/// An archive holding segments `first..=last` of `timeline` (16 MiB), minus `without`.
fn keys(timeline: u32, first: u64, last: u64, without: &[u64]) -> Vec<String> {
    (first..=last)
        .filter(|s| !without.contains(s))
        .map(|s| format!("{PREFIX}{timeline:08X}/{timeline:08X}00000000{s:08X}.zst"))
        .collect()
}

fn holdings(keys: &[String]) -> Holdings {
    Holdings::from_keys(PREFIX, MIB16, keys.iter().map(String::as_str))
}

/// Timeline 1 from segment 2 to `t1_last`, then timeline 2 (segments 5 to 8, its history).
fn failed_over(t1_last: u64) -> Vec<String> {
    let mut listed = keys(1, 2, t1_last, &[]);
    listed.extend(keys(2, 5, 8, &[]));
    listed.push(format!("{PREFIX}history/00000002.history.zst"));
    listed
}

fn one_timeline() -> Vec<Stretch> {
    stretches(1, "").unwrap()
}

#[test]
fn a_listing_sorts_segments_histories_and_gap_markers_and_passes_over_the_rest() {
    let mut listed = keys(1, 2, 3, &[]);
    listed.extend([
        format!("{PREFIX}00000001/000000010000000000000004.partial.zst"),
        format!("{PREFIX}00000001/000000010000000000000002.00000028.backup.zst"),
        format!("{PREFIX}history/00000002.history.zst"),
        format!("{PREFIX}gaps/000000010000000000000005-000000010000000000000007.json"),
        "p/ns/db/wal/8/00000001/000000010000000000000009.zst".to_owned(),
    ]);
    let held = holdings(&listed);
    let numbers: Vec<u64> = (0..10).filter(|n| held.segments[&1].contains(*n)).collect();
    assert_eq!(numbers, [2, 3], "000000010000000000000002 and …3");
    assert_eq!(held.histories, BTreeSet::from([2]));
    assert_eq!(
        held.gaps,
        [(
            "000000010000000000000005".to_owned(),
            "000000010000000000000007".to_owned()
        )]
    );
    assert_eq!(held.newest_timeline(), Some(2));
}

#[test]
fn a_history_file_gives_each_timeline_its_stretch() {
    let history = "1\t0/5000100\tno recovery target specified\n\n2\t0/9000000\tat restore point\n";
    assert_eq!(
        stretches(3, history).unwrap(),
        [
            Stretch {
                timeline: 1,
                begins: Lsn(0),
                ends: Some(lsn("0/5000100"))
            },
            Stretch {
                timeline: 2,
                begins: lsn("0/5000100"),
                ends: Some(lsn("0/9000000"))
            },
            Stretch {
                timeline: 3,
                begins: lsn("0/9000000"),
                ends: None
            },
        ]
    );
    assert!(stretches(3, "1 nowhere\n").is_err());
}

#[test]
fn an_unbroken_archive_has_nothing_to_report() {
    let held = holdings(&keys(1, 2, 9, &[]));
    let report = walk(
        &held,
        Some(&one_timeline()),
        &[(1, lsn("0/2000028"))],
        &BTreeSet::new(),
    );
    assert_eq!(report.breaks(), 0, "{report:?}");
    assert_eq!(report.segments, 8);
    assert_eq!(
        report.first_segment.as_deref(),
        Some("000000010000000000000002")
    );
    assert_eq!(
        report.last_segment.as_deref(),
        Some("000000010000000000000009")
    );
    assert_eq!(report.timelines, [1]);
}

#[test]
fn a_missing_segment_is_named_and_one_waiting_on_the_primary_is_not() {
    let held = holdings(&keys(1, 2, 9, &[5, 8]));
    let pending = BTreeSet::from(["000000010000000000000008".to_owned()]);
    let report = walk(
        &held,
        Some(&one_timeline()),
        &[(1, lsn("0/2000028"))],
        &pending,
    );
    assert_eq!(report.missing, ["000000010000000000000005"]);
    assert_eq!(
        (report.missing_count, report.pending, report.segments),
        (1, 1, 6)
    );
    assert_eq!(report.breaks(), 1);
}

#[test]
fn the_span_starts_at_the_oldest_base_backup() {
    // Segments before the oldest base backup went with retention: not a gap.
    let held = holdings(&keys(1, 6, 9, &[]));
    let bases = [(1, lsn("0/8000028")), (1, lsn("0/6000060"))];
    let report = walk(&held, Some(&one_timeline()), &bases, &BTreeSet::new());
    assert_eq!(report.breaks(), 0, "{report:?}");
    assert_eq!(
        report.first_segment.as_deref(),
        Some("000000010000000000000006")
    );
    // No base backup: nothing to check yet.
    let report = walk(&held, Some(&one_timeline()), &[], &BTreeSet::new());
    assert_eq!((report.segments, report.first_segment), (0, None));
}

#[test]
fn segments_released_by_the_disk_policy_are_counted_apart() {
    let mut listed = keys(1, 2, 9, &[4, 5, 6]);
    listed.push(format!(
        "{PREFIX}gaps/000000010000000000000004-000000010000000000000005.json"
    ));
    let report = walk(
        &holdings(&listed),
        Some(&one_timeline()),
        &[(1, lsn("0/2000000"))],
        &BTreeSet::new(),
    );
    assert_eq!(report.released_count, 2);
    assert_eq!(report.missing, ["000000010000000000000006"]);
    assert_eq!(report.breaks(), 3);
}

#[test]
fn the_walk_crosses_a_failover_through_the_history_file() {
    // Timeline 1 to 0/5000100; timeline 2 from there (its first segment is 5). The old primary
    // also archived 5 and 6 of timeline 1 (written past the switch): not needed, not a gap.
    let listed = failed_over(6);
    let chain = stretches(2, "1\t0/5000100\tno recovery target specified\n").unwrap();
    let base = [(1, lsn("0/2000028"))];
    let report = walk(&holdings(&listed), Some(&chain), &base, &BTreeSet::new());
    assert_eq!(report.breaks(), 0, "{report:?}");
    assert_eq!(report.timelines, [1, 2]);
    assert_eq!(report.segments, 3 + 4);
    assert_eq!(
        report.last_segment.as_deref(),
        Some("000000020000000000000008")
    );

    // Timeline 1's last segment before the switch never reached the bucket (the old primary
    // died first): that is a gap, named on its timeline.
    let listed = failed_over(3);
    let report = walk(&holdings(&listed), Some(&chain), &base, &BTreeSet::new());
    assert_eq!(report.missing, ["000000010000000000000004"]);
}

#[test]
fn missing_history_files_are_named() {
    // The newest timeline's own history is gone: nothing before it can be followed.
    let held = holdings(&keys(2, 5, 8, &[]));
    let report = walk(&held, None, &[(1, lsn("0/2000028"))], &BTreeSet::new());
    assert_eq!(report.missing_history, [2]);
    // An ancestor's is gone (timeline 3's names 2, whose own file is absent).
    let mut listed = keys(1, 2, 4, &[]);
    listed.extend(keys(2, 5, 5, &[]));
    listed.extend(keys(3, 6, 6, &[]));
    listed.push(format!("{PREFIX}history/00000003.history.zst"));
    let chain = stretches(3, "1\t0/5000000\tx\n2\t0/6000000\ty\n").unwrap();
    let report = walk(
        &holdings(&listed),
        Some(&chain),
        &[(1, lsn("0/2000028"))],
        &BTreeSet::new(),
    );
    assert_eq!(report.missing_history, [2]);
    assert_eq!((report.missing_count, report.segments), (0, 5));
}

#[test]
fn a_base_backup_on_an_abandoned_branch_is_not_the_start() {
    // Timeline 2 left timeline 1 at 0/5000000; a base backup taken on timeline 1 after that
    // point belongs to a branch the newest history does not follow.
    let listed = failed_over(7);
    let chain = stretches(2, "1\t0/5000000\tx\n").unwrap();
    let bases = [(1, lsn("0/6000028")), (2, lsn("0/7000028"))];
    let report = walk(&holdings(&listed), Some(&chain), &bases, &BTreeSet::new());
    assert_eq!(
        report.first_segment.as_deref(),
        Some("000000020000000000000007")
    );
    assert_eq!(report.breaks(), 0, "{report:?}");
}

fn header(info: u16, page: u64, sysid: u64, size: u32) -> [u8; LONG_HEADER] {
    let mut h = [0u8; LONG_HEADER];
    h[0..2].copy_from_slice(&0xD110u16.to_le_bytes());
    h[2..4].copy_from_slice(&info.to_le_bytes());
    h[4..8].copy_from_slice(&1u32.to_le_bytes());
    h[8..16].copy_from_slice(&page.to_le_bytes());
    h[24..32].copy_from_slice(&sysid.to_le_bytes());
    h[32..36].copy_from_slice(&size.to_le_bytes());
    h[36..40].copy_from_slice(&8192u32.to_le_bytes());
    h
}

#[test]
fn a_first_page_must_name_this_system_its_segment_size_and_its_place() {
    let at = lsn("0/5000000");
    let ok = header(0x0002, at.0, 7, 16 << 20);
    assert_eq!(header_mismatch(&ok, 7, MIB16, at), None);
    let other = header(0x0002, at.0, 8, 16 << 20);
    assert_eq!(
        header_mismatch(&other, 7, MIB16, at).unwrap(),
        "it belongs to database system 8"
    );
    let moved = header(0x0002, lsn("0/6000000").0, 7, 16 << 20);
    assert!(
        header_mismatch(&moved, 7, MIB16, at)
            .unwrap()
            .contains("0/6000000")
    );
    let size = header(0x0002, at.0, 7, 64 << 20);
    assert!(
        header_mismatch(&size, 7, MIB16, at)
            .unwrap()
            .contains("67108864")
    );
    let short = header(0, at.0, 7, 16 << 20);
    assert!(
        header_mismatch(&short, 7, MIB16, at)
            .unwrap()
            .contains("long header")
    );
}
