//! Verifications of a Completed Backup, decided on plain values: whether one is asked for, where
//! its Job stands, and the status and `Verified` condition its report makes.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde::Deserialize;

use crate::crd::conditions::VERIFIED;
use crate::crd::{
    Backup, BackupStatus, VERIFY_ANNOTATION, Verification, VerificationCheck, VerificationPhase,
    failed_check_reason, verify_request,
};
use crate::runtime::conditions::{self, Update};
use crate::runtime::jobs::{JobState, deadline_exceeded, job_state};

/// The next verification step for a Completed Backup.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Nothing asked, or the answer is already in the status.
    Idle,
    /// Start the Job for `request`.
    Start { request: String },
    /// A Job of an earlier request is in the way of `request`: delete it first.
    ReplaceJob,
    /// A Job with this name exists that is not this Backup's.
    Conflict { job: String },
    /// The Job of the recorded request runs (or is not in the cache yet).
    Running,
    /// The Job of the recorded request finished: read its report.
    Finished,
    /// The recorded run's Job is gone before it finished.
    JobGone,
}

/// Decides the next step from the Backup (annotation, recorded verification) and the Job named
/// `verify_job_name(backup)`.
pub fn next(backup: &Backup, job: Option<&Job>) -> Next {
    let recorded = backup.status.as_ref().and_then(|s| s.verification.as_ref());
    let recorded_request = recorded.and_then(|v| v.request.as_deref());
    let asked = verify_request(backup).filter(|asked| Some(*asked) != recorded_request);
    let running = recorded.and_then(|v| v.phase) == Some(VerificationPhase::Running);
    // Settled first: a Job in the way is reported once, with the request it stopped, and not
    // again at every later reconcile.
    if asked.is_none() && !running {
        return Next::Idle;
    }
    if let Some(job) = job
        && !owned_by(job, backup)
    {
        return Next::Conflict {
            job: job.name_any(),
        };
    }
    let job_request = job.and_then(|j| j.annotations().get(VERIFY_ANNOTATION));
    if let Some(asked) = asked {
        return match job_request {
            Some(r) if r == asked => Next::Running,
            Some(_) => Next::ReplaceJob,
            None => Next::Start {
                request: asked.to_owned(),
            },
        };
    }
    match job {
        Some(job) if job_request.map(String::as_str) == recorded_request => match job_state(job) {
            JobState::Active { .. } => Next::Running,
            JobState::Succeeded { .. } | JobState::Failed { .. } => Next::Finished,
        },
        _ => Next::JobGone,
    }
}

fn owned_by(job: &Job, backup: &Backup) -> bool {
    backup
        .uid()
        .is_some_and(|uid| job.owner_references().iter().any(|o| o.uid == uid))
}

/// The report `backup-agent verify-restore` writes to its termination message. Every field is
/// optional to serde; a report without a phase is no report (see [`finished`]).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Report {
    pub phase: String,
    pub failed_check: Option<String>,
    pub checks: Vec<VerificationCheck>,
    pub databases: u64,
    pub tables: u64,
    pub rows: u64,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub duration_seconds: Option<f64>,
    pub message: String,
}

/// The verification the finished `job` reports: the agent's report when its termination message
/// holds one, an `Error` naming the Job's own failure otherwise (a deadline, a crash).
pub fn finished(
    old: Option<&Verification>,
    job: &Job,
    termination: Option<&str>,
    now: &Time,
) -> Verification {
    let mut verification = old.cloned().unwrap_or_default();
    verification.completed_at = Some(now.clone());
    let report = termination
        .and_then(|t| serde_json::from_str::<Report>(t.trim()).ok())
        .filter(|r| !r.phase.is_empty());
    let Some(report) = report else {
        verification.phase = Some(VerificationPhase::Error);
        verification.failed_check = None;
        verification.message = Some(job_error(job, termination));
        return verification;
    };
    verification.phase = Some(match report.phase.as_str() {
        "Passed" => VerificationPhase::Passed,
        "Failed" => VerificationPhase::Failed,
        _ => VerificationPhase::Error,
    });
    let count = |n: u64| Some(i64::try_from(n).unwrap_or(i64::MAX));
    verification.checks = report.checks;
    verification.failed_check = report.failed_check;
    verification.databases = count(report.databases);
    verification.tables = count(report.tables);
    verification.rows = count(report.rows);
    verification.duration_seconds = report.duration_seconds;
    if let Some(started) = report.started_at {
        verification.started_at = Some(Time(started));
    }
    if let Some(completed) = report.completed_at {
        verification.completed_at = Some(Time(completed));
    }
    verification.message = Some(report.message);
    verification
}

/// Why a Job without a readable report ended.
fn job_error(job: &Job, termination: Option<&str>) -> String {
    let name = job.name_any();
    if deadline_exceeded(job) {
        let deadline = job.spec.as_ref().and_then(|s| s.active_deadline_seconds);
        return format!(
            "verification Job {name} ran longer than its deadline ({}s) and was stopped \
             (spec.backup.verify.jobDeadlineSeconds)",
            deadline.unwrap_or_default()
        );
    }
    let detail = match (job_state(job), termination.and_then(last_line)) {
        (_, Some(line)) => line.to_owned(),
        (JobState::Failed { message }, None) => message,
        _ => "no report in its termination message".to_owned(),
    };
    format!("verification Job {name} left no report: {detail}")
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

/// The reason of the `Verified` condition (and the Event) for `verification`.
pub fn reason(verification: &Verification) -> &'static str {
    match verification.phase {
        Some(VerificationPhase::Passed) => "Verified",
        Some(VerificationPhase::Failed) => {
            failed_check_reason(verification.failed_check.as_deref())
        }
        Some(VerificationPhase::Running | VerificationPhase::Error) | None => "VerificationError",
    }
}

/// `old` with `verification` and, once it finished, its `Verified` condition (a running
/// re-verification leaves the previous verdict standing).
pub fn with_verification(
    old: Option<&BackupStatus>,
    verification: Verification,
    now: &Time,
) -> BackupStatus {
    let mut status = old.cloned().unwrap_or_default();
    if verification.phase == Some(VerificationPhase::Running) {
        status.verification = Some(verification);
        return status;
    }
    let message = verification.message.clone().unwrap_or_default();
    let update = Update {
        type_: VERIFIED,
        status: verification.phase == Some(VerificationPhase::Passed),
        reason: reason(&verification),
        message,
    };
    conditions::set(&mut status.conditions, update, None, now);
    status.verification = Some(verification);
    status
}

/// A verification that has just started for `request` in Job `job`.
pub fn started(request: &str, job: &str, now: &Time) -> Verification {
    Verification {
        phase: Some(VerificationPhase::Running),
        request: Some(request.to_owned()),
        job: Some(job.to_owned()),
        started_at: Some(now.clone()),
        message: Some(format!(
            "Job {job} restores the backup into a throwaway server"
        )),
        ..Verification::default()
    }
}

#[cfg(test)]
#[path = "verification_tests.rs"]
mod tests;
