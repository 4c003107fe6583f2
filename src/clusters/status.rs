//! The last step of the pipeline: the status, computed only from what was applied and observed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::archiving::{self, Archiving};
use super::backup_schedule::summary::Summary;
use super::declared::Declared;
use super::ha::PrimaryState;
pub use super::readiness::Readiness;
use super::storage::StorageProgress;
use crate::crd::conditions::{
    BACKUP_SCHEDULED, CLEANUP, CONTINUOUS_ARCHIVING, DECLARED, LAST_BACKUP_SUCCEEDED, READY,
    RESTORED,
};
use crate::crd::{Phase, PostgreSQLStatus, RestoredFrom, SecretNames};
use crate::resources::{Cluster, POSTGRES_PORT};
use crate::runtime::conditions::{self, Update};

/// `LastBackupSucceeded`'s reason when no backup succeeded for about two schedule intervals.
pub const BACKUP_OVERDUE: &str = "BackupOverdue";

/// Where scheduled backups stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupSchedule {
    NotConfigured,
    WaitingForReady,
    Suspended,
    Scheduled,
}

/// Where `spec.restore` stands.
#[derive(Clone, Debug, PartialEq)]
pub enum RestoreProgress {
    /// No `spec.restore`.
    NotRequested,
    /// Restored in an earlier reconcile (`status.restoredFrom` is set).
    Done,
    /// The restore Job succeeded just now.
    Finished(RestoredFrom),
    /// Waiting for the database, the Backup or the Job.
    Pending {
        reason: &'static str,
        message: String,
    },
    /// Cannot proceed until the user acts; not retried.
    Failed {
        reason: &'static str,
        message: String,
    },
}

impl RestoreProgress {
    /// Whether the cluster may be Ready: nothing to restore, or restored.
    pub fn allows_ready(&self) -> bool {
        matches!(self, Self::NotRequested | Self::Done | Self::Finished(_))
    }
}

/// What the reconcile found: a spec it could not accept, a step that failed, the children, or a
/// deletion waiting for the bucket.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The spec cannot be realised; the primary step ran all the same, once the cluster has a
    /// Lease.
    InvalidSpec {
        message: String,
        primary: Option<Box<PrimaryState>>,
    },
    Failed {
        reason: &'static str,
        message: String,
    },
    Applied {
        readiness: Readiness,
        backup: BackupSchedule,
        restore: RestoreProgress,
        backups: Box<Summary>,
        storage: Option<StorageProgress>,
        primary: Box<PrimaryState>,
        archiving: Box<Archiving>,
        declared: Box<Declared>,
        upgrade: Box<super::upgrade::Progress>,
    },
    CleanupBlocked {
        reason: &'static str,
        message: String,
    },
}

/// The status for `outcome`, keeping condition transition times and the backup record of `old`.
pub fn compute(
    old: Option<&PostgreSQLStatus>,
    cluster: &Cluster,
    generation: Option<i64>,
    outcome: &Outcome,
    now: &Time,
) -> PostgreSQLStatus {
    let mut status = old.cloned().unwrap_or_default();
    // Has served before: a cluster that stops being Ready is then Degraded, not Provisioning.
    let was_up =
        conditions::is_true(&status.conditions, READY) || status.phase == Some(Phase::Degraded);
    status.observed_generation = generation;
    // What the serving set runs: the next reconcile tells an upgrade from it.
    status.version = i32::try_from(cluster.serving_major).ok();
    status.image = Some(cluster.postgres_image());
    status.endpoint = Some(format!("{}:{POSTGRES_PORT}", cluster.rw_host()));
    status.secrets = Some(SecretNames {
        app: cluster.app_secret_name(),
        superuser: cluster.superuser_secret_name(),
    });
    let (ready, backup) = match outcome {
        Outcome::InvalidSpec { message, primary } => {
            status.phase = Some(Phase::Failed);
            if let Some(primary) = primary {
                set_primary(&mut status, primary);
            }
            (not_ready("InvalidSpec", message.clone()), None)
        }
        Outcome::Failed { reason, message } => {
            // Ready turns False, so the phase must not say Ready (`kubectl get pg` shows both).
            status.phase = Some(phase(false, was_up));
            (not_ready(reason, message.clone()), None)
        }
        Outcome::CleanupBlocked { reason, message } => {
            let update = Update {
                type_: CLEANUP,
                status: false,
                reason,
                message: message.clone(),
            };
            conditions::set(&mut status.conditions, update, generation, now);
            return status;
        }
        Outcome::Applied {
            readiness,
            backup,
            restore,
            backups,
            storage,
            primary,
            archiving,
            declared,
            upgrade,
        } => {
            let serving = readiness.ready && restore.allows_ready();
            // Only once applied: a change of `instances` is also what makes the primary step
            // bring the Lease's member list up to date, and a failed reconcile must not hide it.
            status.instances = cluster.spec.instances;
            status.ready_instances = readiness.ready_instances;
            set_primary(&mut status, primary);
            status.phase = Some(phase(serving, was_up));
            let ready = match restore {
                _ if serving => Update {
                    type_: READY,
                    status: true,
                    reason: "Ready",
                    message: format!("{0}/{0} instances are ready", readiness.instances),
                },
                RestoreProgress::Pending { message, .. }
                | RestoreProgress::Failed { message, .. }
                    if readiness.ready =>
                {
                    not_ready("WaitingForRestore", message.clone())
                }
                _ => not_ready(
                    "InstancesNotReady",
                    format!(
                        "{}/{} instances are ready",
                        readiness.ready_instances, readiness.instances
                    ),
                ),
            };
            if let Some(storage) = storage {
                conditions::set(&mut status.conditions, storage.condition(), generation, now);
            }
            match archiving.as_ref() {
                Archiving::NotConfigured => {
                    status
                        .conditions
                        .retain(|c| c.type_ != CONTINUOUS_ARCHIVING);
                }
                Archiving::NoReport => {}
                Archiving::Reported(archive) => {
                    let update = archiving::condition(archive);
                    conditions::set(&mut status.conditions, update, generation, now);
                }
            }
            let window = status.recovery_window.as_ref();
            status.recovery_window = archiving::recovery_window(window, archiving, backups);
            set_declared(&mut status, cluster, declared, generation, now);
            set_restore(&mut status, restore, generation, now);
            set_backups(&mut status, backups, generation, now);
            super::upgrade::apply_to(&mut status, upgrade, generation, now);
            (ready, Some(backup_condition(*backup)))
        }
    };
    conditions::set(&mut status.conditions, ready, generation, now);
    if let Some(backup) = backup {
        conditions::set(&mut status.conditions, backup, generation, now);
    }
    status
}

/// The declared roles and databases as the primary's manager reported them (`declared`).
fn set_declared(
    status: &mut PostgreSQLStatus,
    cluster: &Cluster,
    declared: &Declared,
    generation: Option<i64>,
    now: &Time,
) {
    let found = super::declared::status(&cluster.spec.roles, &cluster.spec.databases, declared);
    let nothing = matches!(declared, Declared::Nothing);
    if let Some(objects) = found.objects {
        status.declared = objects;
    }
    match found.condition {
        Some(update) => conditions::set(&mut status.conditions, update, generation, now),
        None if nothing => status.conditions.retain(|c| c.type_ != DECLARED),
        None => {}
    }
}

/// What the primary step found: the holder, a switchover's target, the instances, the last
/// handover, and the system identifier (recorded once, never cleared).
fn set_primary(status: &mut PostgreSQLStatus, primary: &PrimaryState) {
    status.current_primary.clone_from(&primary.current);
    status.target_primary.clone_from(&primary.target);
    status.instance_states.clone_from(&primary.instances);
    if let Some(failover) = &primary.failover {
        status.last_failover = Some(failover.clone());
    }
    if status.system_identifier.is_none() {
        status
            .system_identifier
            .clone_from(&primary.system_identifier);
    }
}

/// The `Restored` condition and `restoredFrom`, for clusters with `spec.restore`.
fn set_restore(
    status: &mut PostgreSQLStatus,
    restore: &RestoreProgress,
    generation: Option<i64>,
    now: &Time,
) {
    let update = match restore {
        RestoreProgress::NotRequested | RestoreProgress::Done => return,
        RestoreProgress::Finished(from) => {
            status.restored_from = Some(from.clone());
            Update {
                type_: RESTORED,
                status: true,
                reason: "Restored",
                message: format!("restored backup {} from {}", from.backup_id, from.location),
            }
        }
        RestoreProgress::Pending { reason, message }
        | RestoreProgress::Failed { reason, message } => Update {
            type_: RESTORED,
            status: false,
            reason,
            message: message.clone(),
        },
    };
    conditions::set(&mut status.conditions, update, generation, now);
}

/// `lastSuccessfulBackup` and `LastBackupSucceeded`, from the cluster's Backups.
fn set_backups(
    status: &mut PostgreSQLStatus,
    backups: &Summary,
    generation: Option<i64>,
    now: &Time,
) {
    status.last_successful_backup = backups.last_successful.clone();
    status.last_verified_backup = backups.last_verified.clone();
    if let Some(verified) = backups.verified.as_ref() {
        conditions::set(&mut status.conditions, verified.clone(), generation, now);
    }
    let update = match (&backups.overdue, &backups.last_finished) {
        (Some(overdue), _) => Update {
            type_: LAST_BACKUP_SUCCEEDED,
            status: false,
            reason: BACKUP_OVERDUE,
            message: overdue.clone(),
        },
        (None, Some(last)) => Update {
            type_: LAST_BACKUP_SUCCEEDED,
            status: last.succeeded,
            reason: if last.succeeded {
                "Completed"
            } else {
                "Failed"
            },
            message: last.message.clone(),
        },
        (None, None) => return,
    };
    conditions::set(&mut status.conditions, update, generation, now);
}

/// The phase from the same fact as the `Ready` condition (`ready`), so the two never disagree.
fn phase(ready: bool, was_up: bool) -> Phase {
    match (ready, was_up) {
        (true, _) => Phase::Ready,
        (false, true) => Phase::Degraded,
        (false, false) => Phase::Provisioning,
    }
}

fn not_ready(reason: &str, message: String) -> Update<'_> {
    Update {
        type_: READY,
        status: false,
        reason,
        message,
    }
}

fn backup_condition(schedule: BackupSchedule) -> Update<'static> {
    let (status, reason, message) = match schedule {
        BackupSchedule::Scheduled => (true, "Scheduled", "the backup CronJob is active"),
        BackupSchedule::WaitingForReady => (
            false,
            "WaitingForReady",
            "backups start once the cluster is Ready",
        ),
        BackupSchedule::Suspended => (false, "Suspended", "spec.backup.suspend is true"),
        BackupSchedule::NotConfigured => (false, "NotConfigured", "spec.backup is not set"),
    };
    Update {
        type_: BACKUP_SCHEDULED,
        status,
        reason,
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;
    use k8s_openapi::jiff::Timestamp;

    fn applied(ready: bool) -> Outcome {
        Outcome::Applied {
            readiness: Readiness {
                instances: 1,
                ready_instances: i32::from(ready),
                ready,
                rolling_out: false,
            },
            backup: BackupSchedule::NotConfigured,
            restore: RestoreProgress::NotRequested,
            backups: Box::default(),
            storage: None,
            primary: Box::default(),
            archiving: Box::new(Archiving::NotConfigured),
            declared: Box::new(Declared::Nothing),
            upgrade: Box::default(),
        }
    }

    /// The status the minimal cluster gets for `outcome` at generation `generation`.
    fn next(
        previous: Option<&PostgreSQLStatus>,
        generation: i64,
        outcome: &Outcome,
    ) -> PostgreSQLStatus {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let now = Time(Timestamp::from_second(1000).unwrap());
        compute(previous, &cluster, Some(generation), outcome, &now)
    }

    #[test]
    fn phases_follow_readiness() {
        let first = next(None, 1, &applied(false));
        assert_eq!(first.phase, Some(Phase::Provisioning));
        assert_eq!(first.endpoint.as_deref(), Some("demo-rw.prod.svc:5432"));
        let ready = next(Some(&first), 1, &applied(true));
        assert_eq!(ready.phase, Some(Phase::Ready));
        assert!(conditions::is_true(&ready.conditions, READY));
        let degraded = next(Some(&ready), 1, &applied(false));
        assert_eq!(degraded.phase, Some(Phase::Degraded));
        let invalid = next(
            Some(&degraded),
            2,
            &Outcome::InvalidSpec {
                message: "bad".into(),
                primary: None,
            },
        );
        assert_eq!(invalid.phase, Some(Phase::Failed));
        let cond = invalid
            .conditions
            .iter()
            .find(|c| c.type_ == READY)
            .unwrap();
        assert_eq!(
            (cond.reason.as_str(), cond.message.as_str()),
            ("InvalidSpec", "bad")
        );
    }

    #[test]
    fn a_failed_step_never_leaves_the_phase_ready() {
        let ready = next(None, 1, &applied(true));
        assert_eq!(ready.phase, Some(Phase::Ready));
        let failed = Outcome::Failed {
            reason: "ApplyFailed",
            message: "applying StatefulSet demo failed".into(),
        };
        let after = next(Some(&ready), 2, &failed);
        assert!(!conditions::is_true(&after.conditions, READY));
        assert_eq!(after.phase, Some(Phase::Degraded));
        let first = next(None, 1, &failed);
        assert_eq!(first.phase, Some(Phase::Provisioning));
    }
}
