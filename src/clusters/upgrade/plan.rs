//! An online major-version upgrade, decided: a pure function of what the operator recorded in
//! the status (`UpgradeRecord`) and what it reads this reconcile (the old primary's preflight
//! and confirmation, the new side's readiness and copy progress). The I/O — the managers'
//! endpoints (`tusk_contract::upgrade_source`, `upgrade_target`), the new instance set's
//! objects, the Lease — is the caller's; docs/src/design/major-upgrades.md has the protocol.
//!
//! Every step can be taken again (an operator restart resumes from the recorded phase), and
//! before the switch every path ends with the old major serving, unchanged: a cancel, a
//! refusal, a cut-over that took too long (thawed, copied on, frozen again later). The switch
//! — the old set's Lease fenced, `status.instanceSet` naming the new set — is the point of no
//! return, so the plan takes it only after the new side confirmed the frozen old primary's
//! final position.

use std::time::Duration;

use tusk_contract::upgrade::UpgradePreflight;
use tusk_contract::upgrade_target::{CopyProgress, CopyState};

/// How long the old primary may stay frozen waiting for the new side's confirmation: the
/// write gap's bound. Past it the old primary is thawed and the cut-over tried again later.
pub const CUT_OVER_TIMEOUT: Duration = Duration::from_secs(30);

pub use crate::crd::UpgradeMethod as Method;
pub use crate::crd::UpgradePhase as Phase;

/// What the status records of an upgrade in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeRecord {
    pub from: u32,
    pub to: u32,
    pub method: Method,
    pub phase: Phase,
    /// The new instance set (`<name>-v<to>`).
    pub new_set: String,
    /// The old primary's final position, once frozen.
    pub frozen_lsn: Option<String>,
    /// How long the record has been in its phase (the operator's clock).
    pub in_phase: Duration,
}

/// What this reconcile read.
#[derive(Clone, Debug, Default)]
pub struct Observed<'a> {
    /// `spec.version`.
    pub declared: u32,
    /// The serving set's major.
    pub serving: u32,
    pub preflight: Option<&'a UpgradePreflight>,
    /// The new set's primary holds its Lease and is ready.
    pub new_primary_ready: bool,
    pub copy: Option<&'a CopyProgress>,
    /// Whether the old primary answered that every slot is past `frozen_lsn`.
    pub confirmed: Option<bool>,
    /// The old set's Lease was emptied for the switch to the new set: the new side had
    /// finished, and a reconcile since did not record the switch.
    pub fenced_for_switch: bool,
    /// A failover happened on either side since the copy started: a logical slot does not
    /// survive it before PostgreSQL 17, so the copy starts over.
    pub failed_over: bool,
    /// `keepOldFor` has passed since the switch.
    pub keep_old_elapsed: bool,
    /// The base backup the upgrade owes while archiving is on (`owed_backup`): online, once
    /// `keepOldFor` has passed, the new system's; in place, before stopping, the old one's.
    pub owed_base_backup: OwedBaseBackup,
    /// `spec.upgrade.method`: how an upgrade that starts now is carried out.
    pub method: Method,
    /// An in-place upgrade to `spec.version` failed at the spec's current generation: it is
    /// not started again until the spec changes (the user fixed what pg_upgrade refused).
    pub failed_at_this_generation: bool,
    /// In place: pods of the set that still exist.
    pub set_pods: usize,
    /// In place: what the upgrade's Job came to, once it exists.
    pub job: Option<JobOutcome>,
    /// In place: the upgraded primary serves.
    pub primary_serving: bool,
}

/// The base backup an upgrade waits for (`owed_backup`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum OwedBaseBackup {
    /// Archiving is off, or a completed base backup of the system in question exists.
    #[default]
    NotOwed,
    /// Not asked for yet.
    Missing,
    /// The Backup of that name asked for, not completed yet.
    Taking(String),
    /// The Backup of that name failed (deleting it asks again).
    Failed(String),
}

/// What an in-place upgrade's Job came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    Running,
    /// pg_upgrade finished: the new system's identifier.
    Succeeded {
        system_identifier: String,
    },
    /// pg_upgrade refused or failed (every retry): why.
    Failed {
        why: String,
    },
}

/// The next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No upgrade asked, none in progress.
    Idle,
    /// Record a new upgrade in phase `Preflight`.
    Start { from: u32, to: u32, new_set: String },
    /// Nothing to do until something changes: say what is awaited.
    Wait(String),
    /// The databases hold what logical replication cannot carry: say so (condition and Event)
    /// and ask again later, after the user fixed it.
    Refuse(Vec<String>),
    /// Roll the old set with `wal_level = logical` (a restart), then ask the preflight again.
    EnableLogicalWal,
    /// Create the new set (StatefulSet, Lease, the upgrade certificate in the server Secret);
    /// phase `Provisioning`.
    Provision,
    /// Publish on the old primary and start the copy on the new one; phase `Copying` (also
    /// after a failed copy, whose reason `failed` carries into the retry's Event: every step is
    /// idempotent).
    Copy { failed: Option<String> },
    /// Freeze the old primary and record its final position; phase `CuttingOver`.
    Freeze,
    /// The confirmation took too long: thaw the old primary (it serves on) and copy on.
    Thaw,
    /// Carry the sequences and detach on the new side, then fence the old set's Lease and
    /// name the new set in `status.instanceSet` (the client slices follow); phase `Retiring`.
    /// `fenced`: the Lease was emptied for it already, only the record is left to write.
    Switch { fenced: bool },
    /// Scale the old set to zero and, after `keepOldFor` (and the new major's base backup, when
    /// archiving), delete it and its claims; the record ends.
    Retire { delete: bool },
    /// Ask for the base backup the upgrade owes (a physical Backup): online the new major's,
    /// the old set kept until it completes; in place the old major's, before anything stops.
    AskBaseBackup,
    /// Thaw the old primary and record phase `Cancelling` (`why` its message): the children
    /// step stops applying the new set from then on.
    Cancel { why: String },
    /// Phase `Cancelling`: the new set scaled to zero (its subscription stops holding the old
    /// primary's walsenders), the old primary unpublished, the new set deleted; the record ends.
    Undo,
    /// In place: phase `Stopping` (the set's StatefulSet goes to zero pods).
    Stop,
    /// In place: the Job running pg_upgrade on the primary's volume (created unless it
    /// exists); phase `Linking`.
    Link,
    /// In place: upgraded. The replicas' volumes deleted (they clone the new system), the
    /// Lease given the new system's identifier, the switch recorded; phase `Starting`.
    SwitchInPlace { system_identifier: String },
    /// In place: pg_upgrade failed; the set starts again on the old major, unchanged. The
    /// record ends with the reason.
    Fail { why: String },
    /// In place: the upgraded primary serves; the Job deleted, the record ends.
    Finish,
}

/// Decides the next step for cluster `name` (an online record; an in-place one is
/// `in_place_plan`'s, which the caller asks instead).
pub fn plan(name: &str, record: Option<&UpgradeRecord>, seen: &Observed) -> Step {
    let Some(record) = record else {
        return start(name, seen);
    };
    if record.phase == Phase::CuttingOver && seen.fenced_for_switch {
        // Past the point of no return: the old primary is fenced for good, nothing cancels.
        return Step::Switch { fenced: true };
    }
    let switched = record.phase == Phase::Retiring;
    if !switched && record.phase != Phase::Cancelling {
        if seen.declared != record.to {
            return Step::Cancel {
                why: format!("spec.version is {} now", seen.declared),
            };
        }
        if seen.failed_over && matches!(record.phase, Phase::Copying | Phase::CuttingOver) {
            return Step::Cancel {
                why: "a failover during the copy: the logical slots are gone, the copy starts \
                      over"
                    .into(),
            };
        }
    }
    match record.phase {
        Phase::Preflight => preflight(seen),
        Phase::Provisioning if seen.new_primary_ready => Step::Copy { failed: None },
        Phase::Provisioning => Step::Wait(format!("the new set {}'s primary", record.new_set)),
        Phase::Copying => copying(seen.copy),
        Phase::CuttingOver => cutting_over(record, seen),
        Phase::Retiring => retiring(seen),
        Phase::Cancelling => Step::Undo,
        // In place's own phases, never recorded with the online method.
        Phase::Stopping | Phase::Linking | Phase::Starting => Step::Idle,
    }
}

fn retiring(seen: &Observed) -> Step {
    if !seen.keep_old_elapsed {
        return Step::Retire { delete: false };
    }
    match &seen.owed_base_backup {
        OwedBaseBackup::NotOwed => Step::Retire { delete: true },
        OwedBaseBackup::Missing => Step::AskBaseBackup,
        OwedBaseBackup::Taking(name) => Step::Wait(format!(
            "base backup {name} of the new major: the old set is kept until it completes"
        )),
        OwedBaseBackup::Failed(name) => Step::Wait(format!(
            "base backup {name} of the new major, which failed: the old set is kept; delete \
             the Backup to take it again"
        )),
    }
}

fn start(name: &str, seen: &Observed) -> Step {
    if seen.declared <= seen.serving {
        // A lower version is refused at apply (CEL on the transition); nothing to do either way.
        return Step::Idle;
    }
    if seen.method == Method::InPlace && seen.failed_at_this_generation {
        // Stopping the database again for the same refusal would be downtime for nothing.
        return Step::Idle;
    }
    Step::Start {
        from: seen.serving,
        to: seen.declared,
        new_set: format!("{name}-v{}", seen.declared),
    }
}

fn preflight(seen: &Observed) -> Step {
    let Some(preflight) = seen.preflight else {
        return Step::Wait("the old primary's preflight".into());
    };
    let refusals = preflight.refusals();
    if !refusals.is_empty() {
        return Step::Refuse(refusals);
    }
    if preflight.needs_logical_wal() {
        return Step::EnableLogicalWal;
    }
    Step::Provision
}

fn copying(copy: Option<&CopyProgress>) -> Step {
    match copy {
        // Not asked yet (the new primary's manager restarted), or failed: asked again.
        None => Step::Copy { failed: None },
        Some(copy) if matches!(copy.state, CopyState::Idle | CopyState::Failed) => Step::Copy {
            failed: copy.message.clone(),
        },
        Some(copy) if copy.synchronized() => Step::Freeze,
        Some(copy) => {
            let (done, all) = copy
                .databases
                .iter()
                .fold((0, 0), |(d, a), db| (d + db.synchronized, a + db.tables));
            Step::Wait(format!("the copy: {done} of {all} tables"))
        }
    }
}

fn cutting_over(record: &UpgradeRecord, seen: &Observed) -> Step {
    if record.frozen_lsn.is_none() {
        return Step::Freeze;
    }
    match seen.confirmed {
        Some(true) => Step::Switch { fenced: false },
        _ if record.in_phase > CUT_OVER_TIMEOUT => Step::Thaw,
        _ => Step::Wait("the new side to confirm the final position".into()),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
