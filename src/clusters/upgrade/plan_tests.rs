use tusk_contract::upgrade::DatabasePreflight;
use tusk_contract::upgrade_target::DatabaseProgress;

use super::*;

fn record(phase: Phase) -> UpgradeRecord {
    UpgradeRecord {
        from: 15,
        to: 17,
        method: Method::Online,
        phase,
        new_set: "demo-v17".into(),
        frozen_lsn: None,
        in_phase: Duration::ZERO,
    }
}

fn seen() -> Observed<'static> {
    Observed {
        declared: 17,
        serving: 15,
        ..Observed::default()
    }
}

fn preflight(wal_level: &str, without_key: &[&str]) -> UpgradePreflight {
    UpgradePreflight {
        wal_level: wal_level.into(),
        databases: vec![DatabasePreflight {
            name: "app".into(),
            without_replica_identity: without_key.iter().map(|t| t.to_string()).collect(),
            ..DatabasePreflight::default()
        }],
    }
}

fn progress(state: CopyState, synchronized: u64, tables: u64) -> CopyProgress {
    CopyProgress {
        state,
        message: None,
        databases: vec![DatabaseProgress {
            name: "app".into(),
            tables,
            synchronized,
        }],
    }
}

#[test]
fn a_higher_version_starts_an_upgrade_and_the_same_or_lower_does_nothing() {
    assert_eq!(
        plan("demo", None, &seen()),
        Step::Start {
            from: 15,
            to: 17,
            new_set: "demo-v17".into()
        }
    );
    for declared in [15, 14] {
        let same = Observed { declared, ..seen() };
        assert_eq!(plan("demo", None, &same), Step::Idle);
    }
}

#[test]
fn the_preflight_refuses_with_the_tables_enables_logical_wal_or_provisions() {
    let waiting = plan("demo", Some(&record(Phase::Preflight)), &seen());
    assert!(matches!(waiting, Step::Wait(_)), "{waiting:?}");
    let refused = preflight("logical", &["public.events"]);
    let step = plan(
        "demo",
        Some(&record(Phase::Preflight)),
        &Observed {
            preflight: Some(&refused),
            ..seen()
        },
    );
    assert!(
        matches!(&step, Step::Refuse(reasons) if reasons[0].contains("public.events")),
        "{step:?}"
    );
    // Refusals first: a restart for a copy that cannot start would be a restart for nothing.
    let both = preflight("replica", &["public.events"]);
    let step = plan(
        "demo",
        Some(&record(Phase::Preflight)),
        &Observed {
            preflight: Some(&both),
            ..seen()
        },
    );
    assert!(matches!(step, Step::Refuse(_)), "{step:?}");
    let replica = preflight("replica", &[]);
    let step = plan(
        "demo",
        Some(&record(Phase::Preflight)),
        &Observed {
            preflight: Some(&replica),
            ..seen()
        },
    );
    assert_eq!(step, Step::EnableLogicalWal);
    let clean = preflight("logical", &[]);
    let step = plan(
        "demo",
        Some(&record(Phase::Preflight)),
        &Observed {
            preflight: Some(&clean),
            ..seen()
        },
    );
    assert_eq!(step, Step::Provision);
}

#[test]
fn the_copy_starts_once_the_new_primary_is_ready_and_again_after_a_failure() {
    let provisioning = record(Phase::Provisioning);
    assert!(matches!(
        plan("demo", Some(&provisioning), &seen()),
        Step::Wait(_)
    ));
    let ready = Observed {
        new_primary_ready: true,
        ..seen()
    };
    let ask = Step::Copy { failed: None };
    assert_eq!(plan("demo", Some(&provisioning), &ready), ask);
    let copying = record(Phase::Copying);
    assert_eq!(plan("demo", Some(&copying), &seen()), ask);
    for state in [CopyState::Idle, CopyState::Failed] {
        let copy = progress(state, 0, 0);
        let seen = Observed {
            copy: Some(&copy),
            ..seen()
        };
        assert_eq!(plan("demo", Some(&copying), &seen), ask, "{state:?}");
    }
    // A failed copy's reason goes into the retry's Event.
    let failed = CopyProgress {
        message: Some("the synchronisation of items in appdb lost its slot".into()),
        ..progress(CopyState::Failed, 0, 0)
    };
    let seen_failed = Observed {
        copy: Some(&failed),
        ..seen()
    };
    assert_eq!(
        plan("demo", Some(&copying), &seen_failed),
        Step::Copy {
            failed: failed.message.clone()
        }
    );
    let partway = progress(CopyState::Following, 3, 5);
    let step = plan(
        "demo",
        Some(&copying),
        &Observed {
            copy: Some(&partway),
            ..seen()
        },
    );
    assert_eq!(step, Step::Wait("the copy: 3 of 5 tables".into()));
    let done = progress(CopyState::Following, 5, 5);
    let step = plan(
        "demo",
        Some(&copying),
        &Observed {
            copy: Some(&done),
            ..seen()
        },
    );
    assert_eq!(step, Step::Freeze);
}

#[test]
fn the_switch_waits_for_the_confirmation_and_a_slow_one_thaws_the_old_primary() {
    let mut frozen = record(Phase::CuttingOver);
    assert_eq!(
        plan("demo", Some(&frozen), &seen()),
        Step::Freeze,
        "resumed"
    );
    frozen.frozen_lsn = Some("0/3000148".into());
    let behind = Observed {
        confirmed: Some(false),
        ..seen()
    };
    assert!(matches!(
        plan("demo", Some(&frozen), &behind),
        Step::Wait(_)
    ));
    let confirmed = Observed {
        confirmed: Some(true),
        ..seen()
    };
    assert_eq!(
        plan("demo", Some(&frozen), &confirmed),
        Step::Switch { fenced: false }
    );
    frozen.in_phase = CUT_OVER_TIMEOUT + Duration::from_secs(1);
    assert_eq!(plan("demo", Some(&frozen), &behind), Step::Thaw);
    assert_eq!(
        plan("demo", Some(&frozen), &confirmed),
        Step::Switch { fenced: false },
        "confirmed is confirmed, however late"
    );
}

#[test]
fn a_version_changed_before_the_switch_cancels_and_after_it_does_not() {
    let back = Observed {
        declared: 15,
        ..seen()
    };
    for phase in [
        Phase::Preflight,
        Phase::Provisioning,
        Phase::Copying,
        Phase::CuttingOver,
    ] {
        let step = plan("demo", Some(&record(phase)), &back);
        assert!(
            matches!(&step, Step::Cancel { why } if why == "spec.version is 15 now"),
            "{phase:?}: {step:?}"
        );
    }
    let retiring = record(Phase::Retiring);
    assert_eq!(
        plan("demo", Some(&retiring), &back),
        Step::Retire { delete: false }
    );
    let kept = Observed {
        keep_old_elapsed: true,
        ..seen()
    };
    assert_eq!(
        plan("demo", Some(&retiring), &kept),
        Step::Retire { delete: true }
    );
}

#[test]
fn a_cancel_is_recorded_before_the_new_set_is_undone_whatever_the_spec_says_then() {
    let cancelling = record(Phase::Cancelling);
    for declared in [15, 17] {
        let seen = Observed {
            declared,
            failed_over: true,
            ..seen()
        };
        assert_eq!(plan("demo", Some(&cancelling), &seen), Step::Undo);
    }
}

#[test]
fn the_old_set_outlives_keep_old_for_until_the_new_major_has_a_base_backup() {
    let retiring = record(Phase::Retiring);
    let with = |owed_base_backup| Observed {
        keep_old_elapsed: true,
        owed_base_backup,
        ..seen()
    };
    assert_eq!(
        plan("demo", Some(&retiring), &with(OwedBaseBackup::Missing)),
        Step::AskBaseBackup
    );
    for waiting in [
        OwedBaseBackup::Taking("demo-v17-base".into()),
        OwedBaseBackup::Failed("demo-v17-base".into()),
    ] {
        assert!(matches!(
            plan("demo", Some(&retiring), &with(waiting)),
            Step::Wait(what) if what.contains("demo-v17-base")
        ));
    }
    assert_eq!(
        plan("demo", Some(&retiring), &with(OwedBaseBackup::NotOwed)),
        Step::Retire { delete: true }
    );
    // Before keepOldFor nothing is asked for: the old set is only stopped.
    let early = Observed {
        owed_base_backup: OwedBaseBackup::Missing,
        ..seen()
    };
    assert_eq!(
        plan("demo", Some(&retiring), &early),
        Step::Retire { delete: false }
    );
}

#[test]
fn a_failover_during_the_copy_starts_it_over() {
    let failed_over = Observed {
        failed_over: true,
        ..seen()
    };
    for phase in [Phase::Copying, Phase::CuttingOver] {
        assert!(matches!(
            plan("demo", Some(&record(phase)), &failed_over),
            Step::Cancel { .. }
        ));
    }
    assert!(matches!(
        plan("demo", Some(&record(Phase::Provisioning)), &failed_over),
        Step::Wait(_)
    ));
    // The cancel ends the record; the next reconcile starts the upgrade again.
    assert!(matches!(
        plan("demo", None, &failed_over),
        Step::Start { .. }
    ));
}

#[test]
fn a_switch_fenced_but_not_recorded_is_completed_whatever_else_was_read() {
    let mut frozen = record(Phase::CuttingOver);
    frozen.frozen_lsn = Some("0/3000148".into());
    frozen.in_phase = CUT_OVER_TIMEOUT + Duration::from_secs(60);
    // The old primary fenced (no confirmation), the version changed back, its holder gone:
    // none of it undoes a switch whose Lease write went through.
    let fenced = Observed {
        fenced_for_switch: true,
        declared: 15,
        failed_over: true,
        ..seen()
    };
    assert_eq!(
        plan("demo", Some(&frozen), &fenced),
        Step::Switch { fenced: true }
    );
    frozen.frozen_lsn = None;
    assert_eq!(
        plan("demo", Some(&frozen), &fenced),
        Step::Switch { fenced: true },
        "the record read before the freeze's status write landed"
    );
}
