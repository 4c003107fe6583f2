//! Which targets a point-in-time restore refuses before it starts, on plain values.

use super::*;
use crate::clusters::commit_clock;
use backup_store::continuity::{ArchiveContinuity, Holdings, stretches, walk};

const MIB16: u64 = 16 << 20;

fn base(id: &str, completed: &str, stop: &str) -> Base {
    Base {
        id: id.into(),
        completed_at: completed.parse().unwrap(),
        system: "7".into(),
        stop: Lsn::parse(stop).ok(),
        segment_size: Some(MIB16),
        start: Some((1, Lsn(0x3000028))),
        off_history: None,
        major: Some(15),
    }
}

fn bases() -> Vec<Base> {
    vec![
        base("base1", "2026-11-28T09:00:00Z", "0/3000100"),
        base("base2", "2026-11-28T11:00:00Z", "0/9000100"),
    ]
}

fn at(time: &str) -> RestoreTarget {
    RestoreTarget {
        time: Some(time.into()),
        ..RestoreTarget::default()
    }
}

fn lsn(lsn: &str) -> RestoreTarget {
    RestoreTarget {
        lsn: Some(lsn.into()),
        ..RestoreTarget::default()
    }
}

fn chosen(target: &RestoreTarget, id: &str) -> Result<String, &'static str> {
    let bases = bases();
    choose(target, id, &bases, "prod/shop")
        .map(|b| b.id.clone())
        .map_err(|r| r.reason)
}

#[test]
fn a_time_starts_from_the_newest_base_backup_completed_by_then() {
    assert_eq!(
        chosen(&at("2026-11-28T10:00:00Z"), "latest"),
        Ok("base1".into())
    );
    assert_eq!(
        chosen(&at("2026-11-28T12:00:00Z"), "latest"),
        Ok("base2".into())
    );
    assert_eq!(
        chosen(&at("2026-11-28T08:00:00Z"), "latest"),
        Err("TargetBeforeRecoveryWindow")
    );
    // A named base backup completed after the target cannot start a restore to it.
    assert_eq!(
        chosen(&at("2026-11-28T10:00:00Z"), "base2"),
        Err("TargetBeforeRecoveryWindow")
    );
    let refusal = choose(&at("2026-11-28T08:00:00Z"), "latest", &bases(), "prod/shop").unwrap_err();
    assert!(
        refusal.message.contains("2026-11-28T09:00:00Z"),
        "{}",
        refusal.message
    );
    assert!(!refusal.retry);
}

#[test]
fn an_lsn_starts_from_the_newest_base_backup_consistent_by_then() {
    assert_eq!(chosen(&lsn("0/9000200"), "latest"), Ok("base2".into()));
    assert_eq!(chosen(&lsn("0/5000000"), "latest"), Ok("base1".into()));
    assert_eq!(chosen(&lsn("0/5000000"), "base1"), Ok("base1".into()));
    // Before every base backup is consistent, or before the named one is: refused for good.
    assert_eq!(
        chosen(&lsn("0/3000000"), "latest"),
        Err("TargetBeforeRecoveryWindow")
    );
    assert_eq!(
        chosen(&lsn("0/5000000"), "base2"),
        Err("TargetBeforeRecoveryWindow")
    );
}

/// Issue 46, defect 5: a base backup off the newest timeline's history (the pod would fail
/// with "requested timeline is not a child of this server's history" after the download).
#[test]
fn a_base_backup_off_the_newest_history_starts_no_restore() {
    let mut bases = bases();
    bases[1].off_history = Some(
        "it is consistent at 0/9000100 on timeline 1, which the newest \
        timeline (2) left at 0/5000060"
            .into(),
    );
    let chosen = |target: &RestoreTarget, id: &str| {
        choose(target, id, &bases, "prod/shop").map(|b| b.id.clone())
    };
    assert_eq!(
        chosen(&RestoreTarget::default(), "latest"),
        Ok("base1".into())
    );
    assert_eq!(
        chosen(&at("2026-11-28T12:00:00Z"), "latest"),
        Ok("base1".into())
    );
    let refusal = chosen(&RestoreTarget::default(), "base2").unwrap_err();
    assert_eq!(refusal.reason, "BaseBackupOffHistory");
    assert!(
        refusal.message.contains("left at 0/5000060"),
        "{}",
        refusal.message
    );
    assert!(!refusal.retry);
    bases[0].off_history = bases[1].off_history.clone();
    let none = choose(&RestoreTarget::default(), "latest", &bases, "prod/shop").unwrap_err();
    assert_eq!(none.reason, "NoBaseBackup");
    assert!(none.message.contains("newest timeline"), "{}", none.message);
}

#[test]
fn no_base_backup_no_restore() {
    let none = choose(&RestoreTarget::default(), "latest", &[], "prod/shop").unwrap_err();
    assert_eq!(none.reason, "NoBaseBackup");
    assert_eq!(
        chosen(&RestoreTarget::default(), "base9"),
        Err("NoBaseBackup")
    );
    assert_eq!(
        chosen(&RestoreTarget::default(), "latest"),
        Ok("base2".into())
    );
}

fn wal(name: &str, archived: &str) -> ObjectInfo {
    ObjectInfo {
        key: format!(
            "p/prod/shop/wal/7/{}/{name}.zst",
            &name[..8.min(name.len())]
        ),
        size: 1,
        last_modified: archived.parse().ok(),
    }
}

#[test]
fn a_target_after_the_newest_archived_wal_waits_for_the_archive() {
    let archive = [
        wal("000000010000000000000003", "2026-11-28T09:00:05Z"),
        wal("000000010000000000000004", "2026-11-28T09:30:00Z"),
    ];
    let base1 = &bases()[0];
    let refusal = reaches(
        &at("2026-11-28T10:00:00Z"),
        base1,
        &archive,
        &Clock::Unknown,
    )
    .unwrap_err();
    assert_eq!((refusal.reason, refusal.retry), ("TargetNotArchived", true));
    assert!(
        refusal.message.contains("2026-11-28T09:30:00Z"),
        "{}",
        refusal.message
    );
    assert!(
        reaches(
            &at("2026-11-28T09:15:00Z"),
            base1,
            &archive,
            &Clock::Unknown
        )
        .is_ok()
    );
    // The segment holding the LSN must be archived: segment 4 ends at 0/5000000.
    assert!(reaches(&lsn("0/4FFFFFF"), base1, &archive, &Clock::Unknown).is_ok());
    assert_eq!(
        reaches(&lsn("0/5000000"), base1, &archive, &Clock::Unknown)
            .unwrap_err()
            .reason,
        "TargetNotArchived"
    );
    // Names and transaction ids are PostgreSQL's to find; a store without times judges nothing.
    let name = RestoreTarget {
        name: Some("before-drop".into()),
        ..RestoreTarget::default()
    };
    assert!(reaches(&name, base1, &[], &Clock::Unknown).is_ok());
    let untimed = [wal("000000010000000000000003", "")];
    assert!(
        reaches(
            &at("2026-11-28T10:00:00Z"),
            base1,
            &untimed,
            &Clock::Unknown
        )
        .is_ok()
    );
}

#[test]
fn a_time_is_judged_by_the_newest_commit_the_wal_holds_not_by_upload_times() {
    // Segment 4 was uploaded at 09:30 but its last commit was at 09:20 (issue 46, defect 6):
    // a target at 09:25 was admitted and failed after the whole download.
    let archive = [
        wal("000000010000000000000003", "2026-11-28T09:00:05Z"),
        wal("000000010000000000000004", "2026-11-28T09:30:00Z"),
    ];
    let clock = Clock::Commit(commit_clock::NewestCommit {
        at: "2026-11-28T09:20:00Z".parse().unwrap(),
        segment: "000000010000000000000004".into(),
    });
    let base1 = &bases()[0];
    let refusal = reaches(&at("2026-11-28T09:25:00Z"), base1, &archive, &clock).unwrap_err();
    assert_eq!((refusal.reason, refusal.retry), ("TargetNotArchived", true));
    for named in ["2026-11-28T09:20:00Z", "000000010000000000000004"] {
        assert!(refusal.message.contains(named), "{}", refusal.message);
    }
    // At the commit's own time: PostgreSQL stops only at a commit after the target.
    assert!(reaches(&at("2026-11-28T09:20:00Z"), base1, &archive, &clock).is_err());
    assert!(reaches(&at("2026-11-28T09:19:59Z"), base1, &archive, &clock).is_ok());
    // An idle source: the last commit long before its last upload and the target.
    assert!(reaches(&at("2026-11-28T12:00:00Z"), base1, &archive, &clock).is_err());
}

#[test]
fn only_segments_count_as_wal_by_upload_time() {
    // A restore point, a partial segment and a backup label uploaded later say nothing of
    // the commits archived.
    let later = "2026-11-28T11:00:00Z";
    let archive = [
        wal("000000010000000000000003", "2026-11-28T09:30:00Z"),
        wal("000000010000000000000004.partial", later),
        wal("000000010000000000000003.00000028.backup", later),
        ObjectInfo {
            key: "p/prod/shop/wal/7/points/tusk-verify-000001764320400.json".into(),
            size: 1,
            last_modified: later.parse().ok(),
        },
    ];
    let refusal = reaches(
        &at("2026-11-28T10:00:00Z"),
        &bases()[0],
        &archive,
        &Clock::Unknown,
    );
    assert_eq!(refusal.unwrap_err().reason, "TargetNotArchived");
}

#[test]
fn a_target_past_a_gap_in_the_archive_is_refused_for_a_base_backup_before_it() {
    let archive = [
        wal("000000010000000000000003", "2026-11-28T09:00:05Z"),
        wal("000000010000000000000004", "2026-11-28T09:10:00Z"),
        // Segments 5 to 6 were released unarchived.
        ObjectInfo {
            key: "p/prod/shop/wal/7/gaps/000000010000000000000005-000000010000000000000006.json"
                .into(),
            size: 1,
            last_modified: "2026-11-28T09:40:00Z".parse().ok(),
        },
        wal("000000010000000000000007", "2026-11-28T09:40:00Z"),
        wal("00000001000000000000000A", "2026-11-28T12:00:00Z"),
    ];
    let base1 = &bases()[0];
    // Before the gap: reachable.
    assert!(
        reaches(
            &at("2026-11-28T09:05:00Z"),
            base1,
            &archive,
            &Clock::Unknown
        )
        .is_ok()
    );
    assert!(reaches(&lsn("0/4FFFFFF"), base1, &archive, &Clock::Unknown).is_ok());
    // From the gap on, from base1: refused, for good, naming the marker.
    for target in [
        at("2026-11-28T09:30:00Z"),
        lsn("0/5000000"),
        lsn("0/9000000"),
    ] {
        let refusal = reaches(&target, base1, &archive, &Clock::Unknown).unwrap_err();
        assert_eq!(
            (refusal.reason, refusal.retry),
            ("TargetInArchiveGap", false)
        );
        assert!(
            refusal
                .message
                .contains("000000010000000000000005-000000010000000000000006")
        );
    }
    // base2, consistent after the gap, is not concerned.
    let base2 = &bases()[1];
    assert!(
        reaches(
            &at("2026-11-28T11:30:00Z"),
            base2,
            &archive,
            &Clock::Unknown
        )
        .is_ok()
    );
    assert!(reaches(&lsn("0/A000000"), base2, &archive, &Clock::Unknown).is_ok());
}

/// The walk of an archive of timeline 1 holding `segments` (the low 8 hex digits) from base1.
fn walked(segments: &[u32], gaps: &[(&str, &str)]) -> ArchiveContinuity {
    let prefix = "p/wal/7/";
    let mut keys: Vec<String> = (segments.iter())
        .map(|n| format!("{prefix}00000001/00000001000000000000{n:04X}.zst"))
        .collect();
    keys.extend(
        gaps.iter()
            .map(|(a, b)| format!("{prefix}gaps/{a}-{b}.json")),
    );
    let holdings = Holdings::from_keys(prefix, MIB16, keys.iter().map(String::as_str));
    let chain = stretches(1, "").unwrap();
    let from = bases()[0].start.unwrap();
    walk(&holdings, Some(&chain), &[from], &Default::default())
}

#[test]
fn a_restore_to_the_end_of_a_whole_archive_is_admitted() {
    assert_eq!(end_refusal(&walked(&[3, 4, 5, 6], &[]), &bases()[0]), None);
}

#[test]
fn a_restore_to_the_end_of_an_archive_with_a_hole_is_refused_naming_it() {
    let refusal = end_refusal(&walked(&[3, 4, 6, 7], &[]), &bases()[0]).unwrap();
    assert_eq!(refusal.reason, "ArchiveHole");
    assert!(refusal.retry, "the source may still upload it");
    for part in [
        "000000010000000000000005",
        "0/5000000",
        "target.lsn",
        "base1",
    ] {
        assert!(
            refusal.message.contains(part),
            "{part}: {}",
            refusal.message
        );
    }
}

#[test]
fn a_restore_to_the_end_cannot_cross_wal_the_disk_policy_released() {
    let gap = ("000000010000000000000005", "000000010000000000000005");
    let refusal = end_refusal(&walked(&[3, 4, 6], &[gap]), &bases()[0]).unwrap();
    assert_eq!(refusal.reason, "TargetInArchiveGap");
    assert!(!refusal.retry, "released WAL never comes back");
}

#[test]
fn a_base_backup_restores_only_into_its_own_major() {
    let old = base("base1", "2026-11-28T09:00:00Z", "0/3000100");
    assert_eq!(same_major(&old, 15, "prod/shop"), Ok(()));
    let refusal = same_major(&old, 17, "prod/shop").unwrap_err();
    assert_eq!(refusal.reason, "BaseBackupOfAnotherMajor");
    assert!(
        refusal.message.contains("spec.version \"15\""),
        "{}",
        refusal.message
    );
    assert!(!refusal.retry, "only the user can change it");
    // A manifest that names no major is PostgreSQL's to judge.
    let unknown = Base { major: None, ..old };
    assert_eq!(same_major(&unknown, 17, "prod/shop"), Ok(()));
}
