//! The last step of the pipeline: the status, computed only from what was applied and observed.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::{self, BACKUP_SCHEDULED, READY, Update};
use crate::crd::{Phase, PostgreSQLStatus, SecretNames};
use crate::resources::{Cluster, POSTGRES_PORT};

/// Readiness of the StatefulSet: `ready` only when every instance of the current generation
/// passes its readiness probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub instances: i32,
    pub ready_instances: i32,
    pub ready: bool,
    /// The StatefulSet controller has not yet rolled out the current spec to every instance.
    pub rolling_out: bool,
}

impl Readiness {
    pub fn of(statefulset: Option<&StatefulSet>, instances: i32) -> Self {
        let status = statefulset.and_then(|s| s.status.as_ref());
        let ready_instances = status.and_then(|s| s.ready_replicas).unwrap_or(0);
        let current = statefulset.is_some_and(|s| {
            let observed = s.status.as_ref().and_then(|st| st.observed_generation);
            observed.is_some() && observed >= s.metadata.generation
        });
        let updated = status.and_then(|s| s.updated_replicas).unwrap_or(0);
        let rolling_out = statefulset.is_some() && (!current || updated != instances);
        Self {
            instances,
            ready_instances,
            ready: !rolling_out && statefulset.is_some() && ready_instances == instances,
            rolling_out,
        }
    }

    /// A sentence for conditions and Events.
    pub fn message(&self) -> String {
        let counts = format!(
            "{}/{} instances are ready",
            self.ready_instances, self.instances
        );
        if self.rolling_out {
            format!("{counts}; the StatefulSet is rolling out the current spec")
        } else {
            counts
        }
    }
}

/// Where scheduled backups stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupSchedule {
    NotConfigured,
    WaitingForReady,
    Suspended,
    Scheduled,
}

/// What the reconcile found: a spec it could not accept, a step that failed, or the children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    InvalidSpec(String),
    Failed {
        reason: &'static str,
        message: String,
    },
    Applied {
        readiness: Readiness,
        backup: BackupSchedule,
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
    let was_ready = conditions::is_true(&status.conditions, READY);
    status.observed_generation = generation;
    status.instances = cluster.spec.instances;
    status.endpoint = Some(format!("{}:{POSTGRES_PORT}", cluster.rw_host()));
    status.secrets = Some(SecretNames {
        app: cluster.app_secret_name(),
        superuser: cluster.superuser_secret_name(),
    });
    let (ready, backup) = match outcome {
        Outcome::InvalidSpec(message) => {
            status.phase = Some(Phase::Failed);
            (not_ready("InvalidSpec", message.clone()), None)
        }
        Outcome::Failed { reason, message } => {
            // A failed step says nothing new about the pods: keep the phase.
            (not_ready(reason, message.clone()), None)
        }
        Outcome::Applied { readiness, backup } => {
            status.ready_instances = readiness.ready_instances;
            status.phase = Some(
                match (
                    readiness.ready,
                    was_ready || status.phase == Some(Phase::Degraded),
                ) {
                    (true, _) => Phase::Ready,
                    (false, true) => Phase::Degraded,
                    (false, false) => Phase::Provisioning,
                },
            );
            let ready = if readiness.ready {
                Update {
                    type_: READY,
                    status: true,
                    reason: "Ready",
                    message: format!("{0}/{0} instances are ready", readiness.instances),
                }
            } else {
                not_ready(
                    "InstancesNotReady",
                    format!(
                        "{}/{} instances are ready",
                        readiness.ready_instances, readiness.instances
                    ),
                )
            };
            (ready, Some(backup_condition(*backup)))
        }
    };
    conditions::set(&mut status.conditions, ready, generation, now);
    if let Some(backup) = backup {
        conditions::set(&mut status.conditions, backup, generation, now);
    }
    status
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
    use k8s_openapi::api::apps::v1::StatefulSetStatus;
    use k8s_openapi::jiff::Timestamp;

    fn sts(generation: i64, observed: i64, ready: i32, updated: i32) -> StatefulSet {
        let mut sts = StatefulSet::default();
        sts.metadata.generation = Some(generation);
        sts.status = Some(StatefulSetStatus {
            observed_generation: Some(observed),
            ready_replicas: Some(ready),
            updated_replicas: Some(updated),
            ..StatefulSetStatus::default()
        });
        sts
    }

    #[test]
    fn ready_needs_every_instance_of_the_current_generation() {
        assert!(Readiness::of(Some(&sts(2, 2, 1, 1)), 1).ready);
        assert!(
            !Readiness::of(Some(&sts(3, 2, 1, 1)), 1).ready,
            "stale generation"
        );
        assert!(
            !Readiness::of(Some(&sts(2, 2, 0, 1)), 1).ready,
            "pod not ready"
        );
        assert!(
            !Readiness::of(Some(&sts(2, 2, 1, 0)), 1).ready,
            "old revision"
        );
        assert!(!Readiness::of(None, 1).ready);
        let rolling = Readiness::of(Some(&sts(3, 2, 1, 1)), 1);
        assert!(rolling.rolling_out);
        assert_eq!(
            rolling.message(),
            "1/1 instances are ready; the StatefulSet is rolling out the current spec"
        );
        assert_eq!(
            Readiness::of(Some(&sts(2, 2, 0, 1)), 1).message(),
            "0/1 instances are ready"
        );
    }

    #[test]
    fn phases_follow_readiness() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let now = Time(Timestamp::from_second(1000).unwrap());
        let applied = |ready: bool| Outcome::Applied {
            readiness: Readiness {
                instances: 1,
                ready_instances: i32::from(ready),
                ready,
                rolling_out: false,
            },
            backup: BackupSchedule::NotConfigured,
        };
        let first = compute(None, &cluster, Some(1), &applied(false), &now);
        assert_eq!(first.phase, Some(Phase::Provisioning));
        assert_eq!(first.endpoint.as_deref(), Some("demo-rw.prod.svc:5432"));
        let ready = compute(Some(&first), &cluster, Some(1), &applied(true), &now);
        assert_eq!(ready.phase, Some(Phase::Ready));
        assert!(conditions::is_true(&ready.conditions, READY));
        let degraded = compute(Some(&ready), &cluster, Some(1), &applied(false), &now);
        assert_eq!(degraded.phase, Some(Phase::Degraded));
        let invalid = compute(
            Some(&degraded),
            &cluster,
            Some(2),
            &Outcome::InvalidSpec("bad".into()),
            &now,
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
}
