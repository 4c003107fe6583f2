//! What a Job says about its pod, read from its conditions; shared by backups, restores and the
//! cleanup of running backups.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// What a Job reports about its pod.
#[derive(Clone, Debug, PartialEq)]
pub enum JobState {
    Active { started: Option<Time> },
    Succeeded { finished: Option<Time> },
    Failed { message: String },
}

/// The state of a Job from its `Complete`/`Failed` conditions.
pub fn job_state(job: &Job) -> JobState {
    let status = job.status.as_ref();
    let condition = |type_: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_ && c.status == "True"))
    };
    if condition("Complete").is_some() {
        return JobState::Succeeded {
            finished: status.and_then(|s| s.completion_time.clone()),
        };
    }
    if let Some(failed) = condition("Failed") {
        let message = match (&failed.reason, &failed.message) {
            (Some(reason), Some(message)) => format!("{reason}: {message}"),
            (Some(text), None) | (None, Some(text)) => text.clone(),
            (None, None) => "the Job failed".to_owned(),
        };
        return JobState::Failed { message };
    }
    JobState::Active {
        started: status.and_then(|s| s.start_time.clone()),
    }
}

/// The reason Kubernetes gives a Job it stopped at its `activeDeadlineSeconds`.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

/// Whether Kubernetes stopped `job` at its `activeDeadlineSeconds`: it hung or ran too long,
/// which is a different story for the user than a pod that failed.
pub fn deadline_exceeded(job: &Job) -> bool {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|cs| {
        cs.iter().any(|c| {
            c.type_ == "Failed"
                && c.status == "True"
                && c.reason.as_deref() == Some(DEADLINE_EXCEEDED)
        })
    })
}
