use tusk_testkit::wal::{abort, commit, other, segment};

use super::*;

const PAGE: usize = 1024;
const SIZE: usize = 8 * PAGE;
const BASE: u64 = 0x0300_0000;

fn at(unix_micros: i64) -> Option<Timestamp> {
    Some(Timestamp::from_microsecond(unix_micros).unwrap())
}

#[test]
fn the_newest_commit_is_read_among_other_records() {
    let records = [
        other(40),
        commit(1_000_000_000_000_000, 0),
        other(200),
        commit(1_000_000_000_500_000, 16),
        other(8),
    ];
    let times = segment_times(&segment(PAGE, SIZE, BASE, 0, &records));
    assert_eq!(times.newest_commit, at(1_000_000_000_500_000));
    assert_eq!(times.records, 5);
}

#[test]
fn an_abort_counts_as_a_time_target_stops_at_it_too() {
    let records = [commit(2_000_000, 0), abort(3_000_000), other(10)];
    let times = segment_times(&segment(PAGE, SIZE, BASE, 0, &records));
    assert_eq!(times.newest_commit, at(3_000_000));
}

#[test]
fn records_across_pages_and_a_carried_tail_are_read() {
    // Records of 226 bytes: many cross a 1 KiB page; the segment starts inside a record.
    let mut records: Vec<_> = (0..20).map(|_| other(200)).collect();
    records.push(commit(7_000_000, 180));
    records.extend((0..3).map(|_| other(200)));
    let times = segment_times(&segment(PAGE, SIZE, BASE, 1500, &records));
    assert_eq!(times.newest_commit, at(7_000_000));
    assert_eq!(times.records, 24);
}

#[test]
fn a_commit_that_continues_into_the_next_segment_is_read() {
    // 34 records of 232 bytes (aligned) fill 7,888 of the 7,984 bytes the pages hold.
    let mut records: Vec<_> = (0..34).map(|_| other(200)).collect();
    records.push(commit(9_000_000, 200));
    let built = segment(PAGE, SIZE, BASE, 0, &records);
    assert_ne!(
        built[SIZE - 8..],
        [0; 8],
        "the commit fills the segment's end"
    );
    let times = segment_times(&built);
    assert_eq!(times.newest_commit, at(9_000_000));
    assert_eq!(times.records, 35);
}

#[test]
fn what_follows_the_end_of_valid_wal_is_not_read() {
    let records = [commit(5_000_000, 0), other(30)];
    let mut built = segment(PAGE, SIZE, BASE, 0, &records);
    // A recycled file's old bytes after the end: a commit that does not link to the last
    // record (its xl_prev points elsewhere) is not this segment's.
    // Both segments' records end at byte 136 (40 + 34, aligned to 80, + 56; 40 + 96).
    let stale = segment(PAGE, SIZE, BASE, 0, &[other(70), commit(99_000_000, 0)]);
    let end = 136;
    built[end..PAGE].copy_from_slice(&stale[end..PAGE]);
    let times = segment_times(&built);
    assert_eq!(times.newest_commit, at(5_000_000));
    assert_eq!(times.records, 2);
}

#[test]
fn bytes_that_are_not_wal_say_nothing() {
    assert_eq!(segment_times(&[0u8; SIZE]), SegmentTimes::default());
    assert_eq!(segment_times(b"not a segment"), SegmentTimes::default());
    // A stand-in shorter than its header claims.
    let built = segment(PAGE, SIZE, BASE, 0, &[commit(1, 0)]);
    assert_eq!(segment_times(&built[..SIZE / 2]), SegmentTimes::default());
}
