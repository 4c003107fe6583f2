//! An in-place major-version upgrade, decided (`spec.upgrade.method: inPlace`): a pure
//! function of the record and what this reconcile read, as the online plan is.
//!
//! With WAL archiving on, a base backup of the old system first (the way back once the new
//! server has started: `--link` keeps no old directory). Then stop every instance (a clean
//! shutdown: pg_upgrade refuses a server that was not), run the
//! Job (`pg_upgrade --link` on the primary's volume, the old installation copied in), then
//! start the set on the new image with its replicas cloned again. Until the Job succeeds the
//! old directory is whole (a refused check changes nothing, and an attempt cut short is undone
//! by the next), so a failure starts the set again on the old major; a changed `spec.version`
//! cancels only while the set is stopping, since a running pg_upgrade must not be cut short.

use super::plan::{JobOutcome, Observed, OwedBaseBackup, Phase, Step, UpgradeRecord};

pub fn plan(record: &UpgradeRecord, seen: &Observed) -> Step {
    let cancellable = matches!(record.phase, Phase::Preflight | Phase::Stopping);
    if cancellable && seen.declared != record.to {
        return Step::Cancel {
            why: format!("spec.version is {} now", seen.declared),
        };
    }
    match record.phase {
        // Nothing to ask the old primary beforehand (pg_upgrade --check runs in the Job), but
        // with archiving on, the way back first: a base backup of the old system.
        Phase::Preflight => match &seen.owed_base_backup {
            OwedBaseBackup::NotOwed => Step::Stop,
            OwedBaseBackup::Missing => Step::AskBaseBackup,
            OwedBaseBackup::Taking(name) => Step::Wait(format!(
                "base backup {name}, the point a restore goes back to, before the database \
                 stops"
            )),
            OwedBaseBackup::Failed(name) => Step::Wait(format!(
                "base backup {name} failed: the database does not stop for pg_upgrade without \
                 a point to go back to; delete the Backup to take it again"
            )),
        },
        Phase::Stopping if seen.set_pods == 0 => Step::Link,
        Phase::Stopping => Step::Wait(format!(
            "{} instance(s) to stop before pg_upgrade",
            seen.set_pods
        )),
        Phase::Linking => match &seen.job {
            // Lost (deleted by hand): made again; the attempt resumes where it stopped.
            None => Step::Link,
            Some(JobOutcome::Running) => Step::Wait("pg_upgrade".into()),
            Some(JobOutcome::Succeeded { system_identifier }) => Step::SwitchInPlace {
                system_identifier: system_identifier.clone(),
            },
            Some(JobOutcome::Failed { why }) => Step::Fail { why: why.clone() },
        },
        Phase::Starting if seen.primary_serving => Step::Finish,
        Phase::Starting => Step::Wait("the upgraded primary to serve".into()),
        // The online method's phases, never recorded in place.
        Phase::Provisioning
        | Phase::Copying
        | Phase::CuttingOver
        | Phase::Retiring
        | Phase::Cancelling => Step::Idle,
    }
}

#[cfg(test)]
#[path = "in_place_plan_tests.rs"]
mod tests;
