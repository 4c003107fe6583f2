//! Where a backup stands, decided on plain values (the Backup, its Job, its cluster) so that
//! every transition is unit-tested without a client.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::crd::{Backup, BackupMethod, PostgreSQL, SCHEDULED_LABEL};
use crate::resources::{MANAGED_BY, scheduled_cronjob_name};
use crate::runtime::jobs::{
    AgentExit, DEADLINE_EXCEEDED, JobState, deadline_exceeded, failure_message, job_state,
};

/// The next step for a Backup that is not final yet.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Stay Pending: the cluster cannot be backed up yet.
    Wait {
        reason: &'static str,
        message: String,
    },
    /// The backup cannot happen; final.
    Fail {
        reason: &'static str,
        message: String,
    },
    /// Start the Job.
    CreateJob,
    /// The Job this Backup followed is not in the cache; confirm with a read before failing.
    JobGone,
    /// The Job runs.
    Running { started: Option<Time> },
    /// The Job succeeded: read the manifest from the bucket.
    ReadManifest { finished: Option<Time> },
}

/// Decides the next step of `backup` from its cluster, its Job (same name as the Backup) and,
/// once that Job failed, how its agent ended.
pub fn next(
    backup: &Backup,
    cluster: Option<&PostgreSQL>,
    job: Option<&Job>,
    agent: Option<&AgentExit>,
) -> Next {
    let cluster_name = &backup.spec.cluster.name;
    if let Some(job) = job {
        if !job_belongs_to(job, backup) {
            return Next::Fail {
                reason: "JobConflict",
                message: format!(
                    "a Job named {} exists and was not created for this backup",
                    job.name_any()
                ),
            };
        }
        if deadline_exceeded(job) {
            return Next::Fail {
                reason: DEADLINE_EXCEEDED,
                message: deadline_message(job),
            };
        }
        return match job_state(job) {
            JobState::Active { started } => Next::Running { started },
            JobState::Succeeded { finished } => Next::ReadManifest { finished },
            JobState::Failed { message } => Next::Fail {
                reason: "JobFailed",
                message: format!(
                    "backup Job {} failed: {}",
                    job.name_any(),
                    failure_message(&message, agent)
                ),
            },
        };
    }
    let started_before = backup.status.as_ref().is_some_and(|s| s.job.is_some());
    if started_before || is_scheduled(backup) {
        return Next::JobGone;
    }
    let Some(cluster) = cluster else {
        return Next::Wait {
            reason: "ClusterNotFound",
            message: format!("PostgreSQL {cluster_name} does not exist in this namespace"),
        };
    };
    if cluster.spec.backup.is_none() {
        return Next::Fail {
            reason: "NoDestination",
            message: format!(
                "PostgreSQL {cluster_name} has no spec.backup, so there is nowhere to write"
            ),
        };
    }
    if backup.spec.method == BackupMethod::Physical
        && cluster
            .spec
            .backup
            .as_ref()
            .is_none_or(|b| b.wal_archive.is_none())
    {
        return Next::Fail {
            reason: "NotArchiving",
            message: format!(
                "a physical backup restores only with the WAL archive, and PostgreSQL \
                 {cluster_name} does not archive: set spec.backup.walArchive"
            ),
        };
    }
    if cluster.metadata.deletion_timestamp.is_some() {
        return Next::Fail {
            reason: "ClusterDeleting",
            message: format!("PostgreSQL {cluster_name} is being deleted"),
        };
    }
    if !cluster.is_ready() {
        return Next::Wait {
            reason: "ClusterNotReady",
            message: format!("waiting for PostgreSQL {cluster_name} to be Ready"),
        };
    }
    Next::CreateJob
}

/// Names the deadline a stuck or slow Job ran into, and where to change it.
fn deadline_message(job: &Job) -> String {
    let deadline = job.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    let limit = deadline.map_or_else(
        || "its deadline".to_owned(),
        |s| format!("its deadline of {s}s"),
    );
    format!(
        "backup Job {} ran longer than {limit} and was stopped: the dump hung (a lock, a missing \
         Secret, a stalled upload) or needs more time (spec.backup.jobDeadlineSeconds)",
        job.name_any()
    )
}

/// Whether the operator recorded this Backup for a scheduled run.
pub fn is_scheduled(backup: &Backup) -> bool {
    backup.labels().get(SCHEDULED_LABEL).map(String::as_str) == Some("true")
}

/// A Job is this Backup's when the Backup owns it, or, for a scheduled run, when it is a Job of
/// the cluster's CronJob for the Backup's method.
fn job_belongs_to(job: &Job, backup: &Backup) -> bool {
    let owners = job.owner_references();
    let owned_by_backup = backup
        .uid()
        .is_some_and(|uid| owners.iter().any(|o| o.uid == uid));
    let from_schedule = is_scheduled(backup)
        && owners.iter().any(|o| {
            let cluster = &backup.spec.cluster.name;
            o.kind == "CronJob" && o.name == scheduled_cronjob_name(cluster, backup.spec.method)
        })
        && job
            .labels()
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str)
            == Some(MANAGED_BY);
    owned_by_backup || from_schedule
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::finished_job_status;
    use crate::resources::fixtures::*;
    use k8s_openapi::api::batch::v1::JobStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};

    fn backup(labels: &[(&str, &str)]) -> Backup {
        let mut b = Backup::of_cluster("nightly", "prod", "demo");
        b.metadata.uid = Some("backup-uid".into());
        b.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        b
    }

    fn ready_cluster(ready: bool) -> PostgreSQL {
        let mut pg = postgresql(WITH_S3_BACKUP);
        let mut status = crate::crd::PostgreSQLStatus::default();
        status.conditions.push(Condition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            reason: "Test".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        });
        pg.status = Some(status);
        pg
    }

    fn job(owner_kind: &str, owner_uid: &str, condition: Option<(&str, &str)>) -> Job {
        let mut job = Job::default();
        job.metadata.name = Some("nightly".into());
        job.metadata.owner_references = Some(vec![OwnerReference {
            kind: owner_kind.into(),
            name: if owner_kind == "CronJob" {
                "demo-backup"
            } else {
                "nightly"
            }
            .into(),
            uid: owner_uid.into(),
            ..OwnerReference::default()
        }]);
        job.metadata.labels = Some(
            [(
                "app.kubernetes.io/managed-by".to_owned(),
                MANAGED_BY.to_owned(),
            )]
            .into(),
        );
        job.status = Some(
            condition.map_or_else(JobStatus::default, |(type_, message)| {
                let reason = Some("BackoffLimitExceeded").filter(|_| type_ == "Failed");
                finished_job_status(type_, reason, Some(message))
            }),
        );
        job
    }

    #[test]
    fn waits_for_a_ready_cluster_then_creates_the_job() {
        let b = backup(&[]);
        let not_ready = ready_cluster(false);
        assert!(matches!(
            next(&b, None, None, None),
            Next::Wait {
                reason: "ClusterNotFound",
                ..
            }
        ));
        assert!(matches!(
            next(&b, Some(&not_ready), None, None),
            Next::Wait {
                reason: "ClusterNotReady",
                ..
            }
        ));
        assert_eq!(
            next(&b, Some(&ready_cluster(true)), None, None),
            Next::CreateJob
        );
    }

    #[test]
    fn a_cluster_without_destination_fails_the_backup() {
        let mut pg = ready_cluster(true);
        pg.spec.backup = None;
        assert!(matches!(
            next(&backup(&[]), Some(&pg), None, None),
            Next::Fail {
                reason: "NoDestination",
                ..
            }
        ));
    }

    #[test]
    fn a_physical_backup_of_a_cluster_that_does_not_archive_fails_saying_so() {
        let mut b = backup(&[]);
        b.spec.method = BackupMethod::Physical;
        let mut pg = ready_cluster(true);
        let Next::Fail { reason, message } = next(&b, Some(&pg), None, None) else {
            panic!("a base backup without its WAL was started");
        };
        assert_eq!(reason, "NotArchiving");
        assert!(message.contains("spec.backup.walArchive"), "{message}");
        if let Some(policy) = pg.spec.backup.as_mut() {
            policy.wal_archive = Some(crate::crd::WalArchivePolicy::default());
        }
        assert_eq!(next(&b, Some(&pg), None, None), Next::CreateJob);
    }

    #[test]
    fn follows_its_own_job_to_the_end() {
        let b = backup(&[]);
        let pg = ready_cluster(true);
        let running = job("Backup", "backup-uid", None);
        assert!(matches!(
            next(&b, Some(&pg), Some(&running), None),
            Next::Running { .. }
        ));
        let done = job("Backup", "backup-uid", Some(("Complete", "")));
        assert!(matches!(
            next(&b, Some(&pg), Some(&done), None),
            Next::ReadManifest { .. }
        ));
        let failed = job(
            "Backup",
            "backup-uid",
            Some(("Failed", "Job has reached the specified backoff limit")),
        );
        assert_eq!(
            next(&b, Some(&pg), Some(&failed), None),
            Next::Fail {
                reason: "JobFailed",
                message: "backup Job nightly failed: BackoffLimitExceeded: Job has reached the specified backoff limit".into()
            }
        );
        // The agent's own reason, from its pod, is what the Backup says.
        let agent = AgentExit {
            exit_code: 4,
            reason: Some("Error".into()),
            message: Some("bucket does not exist: s3://backups".into()),
        };
        assert_eq!(
            next(&b, Some(&pg), Some(&failed), Some(&agent)),
            Next::Fail {
                reason: "JobFailed",
                message:
                    "backup Job nightly failed: bucket does not exist: s3://backups (exit code 4)"
                        .into()
            }
        );
    }

    #[test]
    fn a_job_stopped_at_its_deadline_fails_the_backup_naming_the_deadline() {
        let mut stuck = job(
            "Backup",
            "backup-uid",
            Some(("Failed", "Job was active longer than specified deadline")),
        );
        if let Some(c) = stuck.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c[0].reason = Some("DeadlineExceeded".into());
        }
        stuck.spec = Some(k8s_openapi::api::batch::v1::JobSpec {
            active_deadline_seconds: Some(900),
            ..Default::default()
        });
        assert_eq!(
            next(&backup(&[]), Some(&ready_cluster(true)), Some(&stuck), None),
            Next::Fail {
                reason: "DeadlineExceeded",
                message:
                    "backup Job nightly ran longer than its deadline of 900s and was stopped: \
                          the dump hung (a lock, a missing Secret, a stalled upload) or needs more \
                          time (spec.backup.jobDeadlineSeconds)"
                        .into()
            }
        );
    }

    #[test]
    fn a_foreign_job_with_the_same_name_is_a_conflict() {
        let b = backup(&[]);
        let foreign = job("Backup", "other-uid", None);
        assert!(matches!(
            next(&b, None, Some(&foreign), None),
            Next::Fail {
                reason: "JobConflict",
                ..
            }
        ));
        let scheduled_job = job("CronJob", "cronjob-uid", None);
        assert!(matches!(
            next(&b, None, Some(&scheduled_job), None),
            Next::Fail { .. }
        ));
    }

    #[test]
    fn scheduled_runs_follow_the_cronjobs_job_and_never_start_one() {
        let b = backup(&[(SCHEDULED_LABEL, "true")]);
        let scheduled_job = job("CronJob", "cronjob-uid", None);
        assert!(matches!(
            next(&b, None, Some(&scheduled_job), None),
            Next::Running { .. }
        ));
        assert_eq!(
            next(&b, Some(&ready_cluster(true)), None, None),
            Next::JobGone
        );
    }
}
