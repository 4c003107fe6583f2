//! The restore plan and its settings, on plain values.

use super::*;

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn no_backup_id_no_restore() {
    let plan = RestorePlan::from_vars(&vars(&[("RESTORE_TUSK_STORE", "s3")])).unwrap();
    assert!(plan.is_none());
}

#[test]
fn the_source_store_reaches_the_agent_unprefixed_and_alone() {
    let plan = RestorePlan::from_vars(&vars(&[
        ("TUSK_RESTORE_BACKUP_ID", "base1"),
        ("TUSK_RESTORE_TARGET_TIME", "2026-11-28 10:00:00+00"),
        ("RESTORE_TUSK_STORE", "s3"),
        ("RESTORE_AWS_SECRET_ACCESS_KEY", "source-secret"),
        ("AWS_SECRET_ACCESS_KEY", "archive-secret"),
        ("TUSK_STORE", "gcs"),
        ("PATH", "/usr/bin"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(plan.backup_id, "base1");
    assert_eq!(
        plan.env,
        vars(&[
            ("TUSK_STORE", "s3"),
            ("AWS_SECRET_ACCESS_KEY", "source-secret"),
            ("PATH", "/usr/bin")
        ])
    );
    assert_eq!(plan.agent, PathBuf::from(DEFAULT_AGENT));
    let settings = plan.recovery_settings(1);
    assert!(settings.contains(&(
        "recovery_target_time",
        "2026-11-28 10:00:00.000000+00".into()
    )));
    assert!(settings.contains(&("recovery_target_action", "promote".into())));
    assert!(
        settings.iter().all(|(k, _)| RECOVERY_KEYS.contains(k)),
        "every key written is removed after the restore"
    );
}

#[test]
fn without_a_target_recovery_runs_to_the_end_of_the_archive() {
    let plan = RestorePlan::from_vars(&vars(&[
        ("TUSK_RESTORE_BACKUP_ID", "latest"),
        ("RESTORE_TUSK_STORE", "s3"),
    ]))
    .unwrap()
    .unwrap();
    let keys: Vec<&str> = plan.recovery_settings(1).iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["restore_command", "recovery_target_timeline"]);
}

#[test]
fn every_accepted_time_becomes_one_postgresql_takes() {
    for (given, expected) in [
        ("2026-11-28T10:00:00Z", "2026-11-28 10:00:00.000000+00"),
        ("2026-11-28T10:00:00+00:00", "2026-11-28 10:00:00.000000+00"),
        (
            "2026-11-28T11:30:00.25+01:30",
            "2026-11-28 10:00:00.250000+00",
        ),
        (
            "2026-11-28T10:00:00.123456789Z",
            "2026-11-28 10:00:00.123456+00",
        ),
        ("2026-11-28 10:00:00.5-05", "2026-11-28 15:00:00.500000+00"),
    ] {
        assert_eq!(postgres_time(given).unwrap(), expected, "{given}");
    }
    let refused = postgres_time("2026-11-28 10:00:00")
        .unwrap_err()
        .to_string();
    assert!(refused.contains("not a time with an offset"), "{refused}");
    assert!(postgres_time("2026-13-45T10:00:00Z").is_err());
}

#[test]
fn a_replicas_base_backup_leaves_no_standby_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pgdata = dir.path();
    std::fs::write(pgdata.join("standby.signal"), "").unwrap();
    std::fs::write(
        pgdata.join("postgresql.auto.conf"),
        "max_slot_wal_keep_size = '800MB'\nprimary_conninfo = 'host=src-0'\n\
         primary_slot_name = 'tusk_src_1'\n",
    )
    .unwrap();
    forget_the_source_standby(pgdata).unwrap();
    assert!(!pgdata.join("standby.signal").exists());
    let conf = std::fs::read_to_string(pgdata.join("postgresql.auto.conf")).unwrap();
    assert_eq!(conf, "max_slot_wal_keep_size = '800MB'\n");
}

#[test]
fn the_own_archive_is_looked_at_only_when_this_cluster_archives() {
    let source = [
        ("TUSK_RESTORE_BACKUP_ID", "b"),
        ("RESTORE_TUSK_STORE", "s3"),
        ("RESTORE_AWS_SECRET_ACCESS_KEY", "source-secret"),
        ("POSTGRES_PASSWORD", "never the agent's"),
    ];
    let plan = RestorePlan::from_vars(&vars(&source)).unwrap().unwrap();
    assert_eq!(plan.own, None);
    let archiving = [
        &source[..],
        &[("TUSK_STORE", "s3"), ("AWS_SECRET_ACCESS_KEY", "own")],
    ];
    let plan = RestorePlan::from_vars(&vars(&archiving.concat()))
        .unwrap()
        .unwrap();
    assert_eq!(
        plan.own,
        Some(vars(&[
            ("TUSK_STORE", "s3"),
            ("AWS_SECRET_ACCESS_KEY", "own")
        ]))
    );
}

#[test]
fn the_recovery_starts_from_the_base_backups_timeline() {
    let label = "START WAL LOCATION: 0/5000028 (file 000000030000000000000005)\n\
                 CHECKPOINT LOCATION: 0/5000060\nSTART TIMELINE: 3\n";
    assert_eq!(start_timeline(label), Some(3));
    assert_eq!(start_timeline(""), None);
}

#[test]
fn two_targets_or_no_store_are_refused() {
    let two = RestorePlan::from_vars(&vars(&[
        ("TUSK_RESTORE_BACKUP_ID", "b"),
        ("RESTORE_TUSK_STORE", "s3"),
        ("TUSK_RESTORE_TARGET_LSN", "0/3000000"),
        ("TUSK_RESTORE_TARGET_NAME", "before"),
    ]));
    assert!(two.is_err());
    let storeless = RestorePlan::from_vars(&vars(&[("TUSK_RESTORE_BACKUP_ID", "b")]));
    assert!(storeless.is_err());
}

#[test]
fn a_restore_that_promoted_is_finished_not_replayed_again() {
    let dir = tempfile::tempdir().unwrap();
    let pgdata = dir.path();
    let touch = |name: &str| std::fs::write(pgdata.join(name), "").unwrap();
    assert!(!already_promoted(pgdata), "nothing unpacked yet");
    touch("PG_VERSION");
    touch("backup_label");
    assert!(!already_promoted(pgdata), "unpacked, not recovered");
    std::fs::rename(pgdata.join("backup_label"), pgdata.join("backup_label.old")).unwrap();
    touch("recovery.signal");
    assert!(!already_promoted(pgdata), "a recovery that stopped short");
    std::fs::remove_file(pgdata.join("recovery.signal")).unwrap();
    assert!(
        already_promoted(pgdata),
        "PostgreSQL promoted: only the last steps are left"
    );
}
