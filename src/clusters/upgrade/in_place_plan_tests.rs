use std::time::Duration;

use super::super::decide as decide_any;
use super::super::plan::Method;
use super::*;

/// As the reconcile asks: the in-place plan for an in-place record, the online one to start.
fn decide(name: &str, record: Option<&UpgradeRecord>, seen: &Observed) -> Step {
    decide_any(name, record, seen)
}

fn record(phase: Phase) -> UpgradeRecord {
    UpgradeRecord {
        from: 15,
        to: 17,
        method: Method::InPlace,
        phase,
        new_set: "demo".into(),
        frozen_lsn: None,
        in_phase: Duration::ZERO,
    }
}

fn seen() -> Observed<'static> {
    Observed {
        declared: 17,
        serving: 15,
        method: Method::InPlace,
        ..Observed::default()
    }
}

#[test]
fn the_set_stops_then_the_job_runs_once_no_pod_is_left() {
    assert_eq!(
        decide("demo", Some(&record(Phase::Preflight)), &seen()),
        Step::Stop
    );
    let running = Observed {
        set_pods: 2,
        ..seen()
    };
    assert!(matches!(
        decide("demo", Some(&record(Phase::Stopping)), &running),
        Step::Wait(_)
    ));
    assert_eq!(
        decide("demo", Some(&record(Phase::Stopping)), &seen()),
        Step::Link
    );
}

#[test]
fn the_jobs_outcome_switches_or_fails_and_a_lost_job_is_made_again() {
    let linking = record(Phase::Linking);
    assert_eq!(decide("demo", Some(&linking), &seen()), Step::Link);
    let running = Observed {
        job: Some(JobOutcome::Running),
        ..seen()
    };
    assert!(matches!(
        decide("demo", Some(&linking), &running),
        Step::Wait(_)
    ));
    let done = Observed {
        job: Some(JobOutcome::Succeeded {
            system_identifier: "7438".into(),
        }),
        ..seen()
    };
    assert_eq!(
        decide("demo", Some(&linking), &done),
        Step::SwitchInPlace {
            system_identifier: "7438".into()
        }
    );
    let refused = Observed {
        job: Some(JobOutcome::Failed {
            why: "adminpack".into(),
        }),
        ..seen()
    };
    assert_eq!(
        decide("demo", Some(&linking), &refused),
        Step::Fail {
            why: "adminpack".into()
        }
    );
}

#[test]
fn a_version_changed_cancels_while_stopping_but_never_a_running_pg_upgrade() {
    let back = Observed {
        declared: 15,
        job: Some(JobOutcome::Running),
        ..seen()
    };
    for phase in [Phase::Preflight, Phase::Stopping] {
        assert!(
            matches!(
                decide("demo", Some(&record(phase)), &back),
                Step::Cancel { .. }
            ),
            "{phase:?}"
        );
    }
    assert!(matches!(
        decide("demo", Some(&record(Phase::Linking)), &back),
        Step::Wait(_)
    ));
}

#[test]
fn the_upgrade_ends_once_the_upgraded_primary_serves() {
    let starting = record(Phase::Starting);
    assert!(matches!(
        decide("demo", Some(&starting), &seen()),
        Step::Wait(_)
    ));
    let serving = Observed {
        primary_serving: true,
        ..seen()
    };
    assert_eq!(decide("demo", Some(&starting), &serving), Step::Finish);
}

#[test]
fn a_failed_in_place_upgrade_is_not_started_again_until_the_spec_changes() {
    let failed = Observed {
        failed_at_this_generation: true,
        ..seen()
    };
    assert_eq!(decide("demo", None, &failed), Step::Idle);
    assert!(matches!(decide("demo", None, &seen()), Step::Start { .. }));
    let online = Observed {
        method: Method::Online,
        ..failed
    };
    assert!(
        matches!(decide("demo", None, &online), Step::Start { .. }),
        "the online method's refusals are its own"
    );
}

#[test]
fn with_archiving_a_base_backup_of_the_old_system_comes_before_the_stop() {
    let with = |owed_base_backup| Observed {
        owed_base_backup,
        ..seen()
    };
    let preflight = record(Phase::Preflight);
    assert_eq!(
        decide("demo", Some(&preflight), &with(OwedBaseBackup::Missing)),
        Step::AskBaseBackup
    );
    for waiting in [
        OwedBaseBackup::Taking("demo-before-v17".into()),
        OwedBaseBackup::Failed("demo-before-v17".into()),
    ] {
        assert!(matches!(
            decide("demo", Some(&preflight), &with(waiting)),
            Step::Wait(what) if what.contains("demo-before-v17")
        ));
    }
    assert_eq!(
        decide("demo", Some(&preflight), &with(OwedBaseBackup::NotOwed)),
        Step::Stop
    );
    // Still cancellable while it waits.
    let back = Observed {
        declared: 15,
        ..with(OwedBaseBackup::Missing)
    };
    assert!(matches!(
        decide("demo", Some(&preflight), &back),
        Step::Cancel { .. }
    ));
}
