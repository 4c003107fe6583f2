use super::*;

#[test]
fn a_failing_archiver_is_false_with_its_error_and_backlog() {
    let update = condition(&ArchiveStatus {
        archived_count: 3,
        failed_count: 2,
        failing: true,
        pending: 4,
        last_archived_wal: Some("000000010000000000000003".into()),
        last_archived_at: Some(1_800_000_000),
        last_failed_wal: Some("000000010000000000000004".into()),
        last_failed_at: Some(1_800_000_060),
        last_error: Some("s3://b: connection refused".into()),
        ..ArchiveStatus::default()
    });
    assert_eq!((update.status, update.reason), (false, "ArchiveFailing"));
    assert_eq!(
        update.message,
        "archiving 000000010000000000000004 failed at 2027-01-15T08:01:00Z: \
         s3://b: connection refused; 4 file(s) wait"
    );
}

#[test]
fn a_conflicting_file_is_its_own_reason_not_a_failure_among_others() {
    let update = condition(&ArchiveStatus {
        failed_count: 5,
        failing: true,
        pending: 2,
        last_failed_wal: Some("000000020000000000000007".into()),
        last_error: Some(
            "000000020000000000000007 is already archived with different contents".into(),
        ),
        conflict: Some("000000020000000000000007".into()),
        ..ArchiveStatus::default()
    });
    assert_eq!((update.status, update.reason), (false, "ArchiveConflict"));
    assert!(
        update.message.starts_with(
            "the bucket holds other bytes under 000000020000000000000007's name: two servers \
             wrote its timeline (a split brain)"
        ),
        "{}",
        update.message
    );
    assert!(
        update.message.ends_with("2 file(s) wait"),
        "{}",
        update.message
    );
}

fn closed_gap(closed_at: Option<i64>) -> ArchiveGap {
    ArchiveGap {
        system_identifier: "7400000000000000001".into(),
        first_segment: Some("000000010000000000000010".into()),
        last_segment: Some("000000010000000000000013".into()),
        files: 4,
        opened_at: 1_800_000_000,
        closed_at,
        volume_used_percent: 81,
        reason: "s3://b: connection refused".into(),
        ..ArchiveGap::default()
    }
}

#[test]
fn an_open_gap_is_false_and_names_what_was_released() {
    let update = condition(&ArchiveStatus {
        failing: true,
        gap: Some(closed_gap(None)),
        ..ArchiveStatus::default()
    });
    assert_eq!((update.status, update.reason), (false, "ArchiveGap"));
    assert!(
        update.message.starts_with(
            "the data volume reached 81 % while archiving failed (s3://b: connection \
             refused): 4 WAL file(s) (000000010000000000000010 to 000000010000000000000013) \
             were released unarchived since 2027-01-15T08:00:00Z"
        ),
        "{}",
        update.message
    );
    // Closed: archiving works again; the base backup is asked for instead.
    let closed = condition(&ArchiveStatus {
        gap: Some(closed_gap(Some(1_800_000_100))),
        ..ArchiveStatus::default()
    });
    assert!(closed.status);
}

#[test]
fn a_closed_gap_asks_for_one_base_backup_named_after_it_within_the_hour() {
    let pg = crate::resources::fixtures::postgresql(crate::resources::fixtures::MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let now = Timestamp::from_second(1_800_000_200).unwrap();
    assert_eq!(gap_backup(&cluster, &closed_gap(None), now), None);
    let backup = gap_backup(&cluster, &closed_gap(Some(1_800_000_100)), now).unwrap();
    assert_eq!(
        backup.metadata.name.as_deref(),
        Some(format!("{}-gap-1800000100", cluster.name).as_str())
    );
    assert_eq!(backup.spec.method, BackupMethod::Physical);
    assert_eq!(backup.spec.cluster.name, cluster.name);
    let later = Timestamp::from_second(1_800_000_100 + 3601).unwrap();
    assert_eq!(
        gap_backup(&cluster, &closed_gap(Some(1_800_000_100)), later),
        None
    );
}

#[test]
fn a_working_archiver_is_true_and_says_what_it_archived_last() {
    let update = condition(&ArchiveStatus {
        archived_count: 3,
        last_archived_wal: Some("000000010000000000000003".into()),
        last_archived_at: Some(1_800_000_000),
        ..ArchiveStatus::default()
    });
    assert_eq!((update.status, update.reason), (true, "Archiving"));
    assert_eq!(
        update.message,
        "archived 000000010000000000000003 at 2027-01-15T08:00:00Z; nothing waits"
    );
    let idle = condition(&ArchiveStatus::default());
    assert!(idle.status && idle.message.starts_with("nothing archived"));
}

#[test]
fn the_recovery_window_spans_the_oldest_base_backup_to_the_last_archived_file() {
    let at = |s| Time(Timestamp::from_second(s).unwrap());
    let backups = Summary {
        oldest_base: Some((at(1_000), "base-old".into())),
        base_backups: 3,
        ..Summary::default()
    };
    let report = Archiving::Reported(Box::new(ArchiveStatus {
        last_archived_at: Some(5_000),
        ..ArchiveStatus::default()
    }));
    let window = recovery_window(None, &report, &backups).unwrap();
    assert_eq!(
        (window.first.clone(), window.last_archived_at.clone()),
        (at(1_000), Some(at(5_000)))
    );
    assert_eq!(
        (window.oldest_base_backup.as_str(), window.base_backups),
        ("base-old", 3)
    );
    // No report this time (a manager restarting): the last one known stays.
    let kept = recovery_window(Some(&window), &Archiving::NoReport, &backups).unwrap();
    assert_eq!(kept.last_archived_at, Some(at(5_000)));
    // Without a base backup, or without archiving, there is no window.
    assert_eq!(
        recovery_window(Some(&window), &report, &Summary::default()),
        None
    );
    assert_eq!(
        recovery_window(Some(&window), &Archiving::NotConfigured, &backups),
        None
    );
}

/// Issue 46, low: the window advertised the span across a gap no restore can cross.
#[test]
fn the_recovery_window_never_spans_a_gap() {
    let at = |s| Time(Timestamp::from_second(s).unwrap());
    let bases = vec![
        (at(1_000), "base-old".to_owned()),
        (at(9_000), "base-gap".to_owned()),
    ];
    let backups = Summary {
        oldest_base: Some(bases[0].clone()),
        base_backups: 2,
        bases: bases.clone(),
        ..Summary::default()
    };
    let gap = |closed_at| ArchiveGap {
        opened_at: 4_000,
        closed_at,
        ..closed_gap(closed_at)
    };
    let report = |gap| {
        Archiving::Reported(Box::new(ArchiveStatus {
            last_archived_at: Some(10_000),
            gap: Some(gap),
            ..ArchiveStatus::default()
        }))
    };
    // Open, or closed with no base backup after it yet: the window ends where the gap began.
    for open in [gap(None), gap(Some(9_500))] {
        let window = recovery_window(None, &report(open), &backups).unwrap();
        assert_eq!(
            (window.first, window.gap_at, window.oldest_base_backup),
            (at(1_000), Some(at(4_000)), "base-old".to_owned())
        );
    }
    // A base backup after it: the window starts from it, whole again.
    let window = recovery_window(None, &report(gap(Some(8_000))), &backups).unwrap();
    assert_eq!(
        (
            window.first,
            window.gap_at,
            window.oldest_base_backup,
            window.base_backups
        ),
        (at(9_000), None, "base-gap".to_owned(), 1)
    );
}

#[test]
fn a_broken_archive_is_false_naming_what_is_missing_and_a_whole_one_says_so() {
    let mut archive = ArchiveStatus {
        last_archived_wal: Some("000000020000000000000009".into()),
        last_archived_at: Some(1_800_000_000),
        continuity: Some(ArchiveContinuity {
            checked_at: 1_800_000_060,
            first_segment: Some("000000010000000000000002".into()),
            last_segment: Some("000000020000000000000009".into()),
            segments: 7,
            missing: vec!["000000010000000000000004".into()],
            missing_count: 1,
            missing_history: vec![2],
            ..ArchiveContinuity::default()
        }),
        ..ArchiveStatus::default()
    };
    let update = condition(&archive);
    assert_eq!((update.status, update.reason), (false, "ArchiveBroken"));
    assert!(
        update.message.contains(
            "segment(s) 000000010000000000000004 missing; the history file of timeline 2 \
             missing"
        ),
        "{}",
        update.message
    );
    // Released segments alone are the gap's story (its own condition while open).
    let check = archive.continuity.as_mut().unwrap();
    (check.missing, check.missing_count, check.missing_history) = (vec![], 0, vec![]);
    check.released_count = 2;
    let update = condition(&archive);
    assert_eq!((update.status, update.reason), (true, "Archiving"));
    assert!(
        update
            .message
            .ends_with("all but 2 the disk policy released (no restore crosses them)")
    );
    archive.continuity.as_mut().unwrap().released_count = 0;
    let update = condition(&archive);
    assert!(
        update.message.ends_with(
            "every one of the 7 segments from 000000010000000000000002 to \
             000000020000000000000009 was in the archive"
        ),
        "{}",
        update.message
    );
}

#[test]
fn a_check_is_owed_while_the_last_one_predates_the_newest_base_backup_for_ten_minutes() {
    let completed = 1_800_000_000;
    let backups = Summary {
        newest_base_at: Some(Time(Timestamp::from_second(completed).unwrap())),
        ..Summary::default()
    };
    let checked_at = |at: i64| {
        Archiving::Reported(Box::new(ArchiveStatus {
            continuity: Some(ArchiveContinuity {
                checked_at: at,
                ..ArchiveContinuity::default()
            }),
            ..ArchiveStatus::default()
        }))
    };
    let now = |s: i64| Timestamp::from_second(completed + s).unwrap();
    let owed = Some(CHECK_OWED_RECHECK);
    assert_eq!(
        check_owed(&checked_at(completed - 5), &backups, now(5)),
        owed
    );
    assert_eq!(
        check_owed(&checked_at(completed + 3), &backups, now(5)),
        None
    );
    // A report without a check yet owes one too; none is awaited after ten minutes.
    let unchecked = Archiving::Reported(Box::default());
    assert_eq!(check_owed(&unchecked, &backups, now(599)), owed);
    assert_eq!(check_owed(&unchecked, &backups, now(600)), None);
    // No report, or no base backup: nothing to wait for.
    assert_eq!(check_owed(&Archiving::NoReport, &backups, now(5)), None);
    let none = Summary::default();
    assert_eq!(check_owed(&checked_at(0), &none, now(5)), None);
}

#[test]
fn a_backlog_that_grows_while_uploads_succeed_is_false() {
    let mut archive = ArchiveStatus {
        archived_count: 900,
        pending: 64,
        last_archived_wal: Some("000000010000000000000384".into()),
        last_archived_at: Some(1_800_000_000),
        ..ArchiveStatus::default()
    };
    assert!(
        condition(&archive).status,
        "four in flight and a burst: still keeping up"
    );
    archive.pending = 200;
    let update = condition(&archive);
    assert!(!update.status);
    assert_eq!(update.reason, "ArchiveBehind");
    assert!(
        update
            .message
            .starts_with("200 file(s) wait while uploads succeed")
            && update.message.contains("000000010000000000000384"),
        "{}",
        update.message
    );
}
