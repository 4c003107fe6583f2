//! One reconcile of a Completed Backup's verification: start the `verify-restore` Job when asked
//! (see `verification` for the decisions), follow it, and record its report.

use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use std::time::Duration;
use tracing::info;

use super::verification::{self, Next};
use crate::crd::{Backup, Verification, VerificationPhase};
use crate::error::{Error, Result};
use crate::resources::{
    self, Cluster, DEFAULT_VERIFY_DEADLINE_SECONDS, VerifyRun, verify_job_name,
};
use crate::runtime::apply::{Change, create, delete};
use crate::runtime::events::{self, normal, warning};
use crate::runtime::jobs::{agent_termination_message, job_pods};
use crate::runtime::status::now;
use crate::runtime::{Context, cached};

/// The action of every Event about a verification.
const ACTION: &str = "Verify";
/// How soon to look again after deleting the Job of an earlier request.
const REPLACE_RECHECK: Duration = Duration::from_secs(2);

/// Verification of the Completed `backup`; no API call when nothing is asked or running.
pub async fn reconcile(backup: &Backup, ctx: &Context) -> Result<Action> {
    let (name, ns) = (backup.name_any(), backup.namespace().unwrap_or_default());
    let job_name = verify_job_name(&name);
    let job = cached(&ctx.caches.jobs, &ns, &job_name);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    match verification::next(backup, job.as_deref()) {
        Next::Idle | Next::Running => Ok(Action::await_change()),
        Next::Start { request } => start(ctx, backup, &request, &job_name).await,
        Next::ReplaceJob => {
            delete(&jobs, &job_name).await?;
            Ok(Action::requeue(REPLACE_RECHECK))
        }
        Next::Conflict { job } => {
            let message = format!("a Job named {job} exists and was not created for this Backup");
            let request = crate::crd::verify_request(backup).unwrap_or_default();
            let run = verification::started(request, &job, &now());
            error(ctx, backup, run, message).await
        }
        Next::Finished => {
            let Some(job) = job else {
                return Ok(Action::await_change());
            };
            let pods = job_pods(&ctx.client, &ns, &job_name)
                .await
                .map_err(|source| Error::Read {
                    kind: "Pod of Job".into(),
                    name: job_name.clone(),
                    source,
                })?;
            let report = agent_termination_message(&pods);
            let old = backup.status.as_ref().and_then(|s| s.verification.as_ref());
            let result = verification::finished(old, &job, report.as_deref(), &now());
            record(ctx, backup, result).await
        }
        Next::JobGone => {
            let read = |source| Error::Read {
                kind: "Job".into(),
                name: job_name.clone(),
                source,
            };
            if jobs.get_opt(&job_name).await.map_err(read)?.is_some() {
                // Only the cache is behind; its next event triggers us again.
                return Ok(Action::requeue(REPLACE_RECHECK));
            }
            let old = backup.status.as_ref().and_then(|s| s.verification.clone());
            let message = format!("Job {job_name} no longer exists; the verification is unknown");
            error(ctx, backup, old.unwrap_or_default(), message).await
        }
    }
}

/// Creates the Job for `request` and records it as Running.
async fn start(ctx: &Context, backup: &Backup, request: &str, job_name: &str) -> Result<Action> {
    let (name, ns) = (backup.name_any(), backup.namespace().unwrap_or_default());
    let run = verification::started(request, job_name, &now());
    let cluster_name = &backup.spec.cluster.name;
    let Some(pg) = cached(&ctx.caches.clusters, &ns, cluster_name) else {
        let message = format!(
            "PostgreSQL {cluster_name} does not exist: its image and major run the verification"
        );
        return error(ctx, backup, run, message).await;
    };
    let policy = pg.spec.backup.as_ref();
    let destination = backup.status.as_ref().and_then(|s| s.destination.as_ref());
    let Some(destination) = destination.or(policy.map(|p| &p.destination)) else {
        let message = "neither the Backup nor its cluster names a destination".to_owned();
        return error(ctx, backup, run, message).await;
    };
    let Some(owner) = backup.controller_owner_ref(&()) else {
        return Err(Error::Invariant(format!("Backup {name} has no uid")));
    };
    let deadline = policy
        .and_then(|p| p.verify.as_ref())
        .and_then(|v| v.job_deadline_seconds)
        .unwrap_or(DEFAULT_VERIFY_DEADLINE_SECONDS);
    let cluster = Cluster::new(&pg)?;
    let plan = VerifyRun {
        backup_id: &name,
        destination,
        request,
        deadline_seconds: deadline,
    };
    let job = resources::verify_job(&cluster, &ctx.agent, &plan, owner);
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    if create(&api, &job).await? == Change::Created {
        info!(backup = %name, namespace = %ns, job = %job_name, "verification Job created");
    }
    write(ctx, backup, run).await?;
    let note = format!("started Job {job_name} to restore the backup into a throwaway server");
    events::publish(
        &ctx.recorder,
        backup,
        normal("VerificationStarted", ACTION, note),
    )
    .await;
    Ok(Action::await_change())
}

/// A verification that could not run: recorded as `Error`, with a Warning.
async fn error(
    ctx: &Context,
    backup: &Backup,
    mut run: Verification,
    message: String,
) -> Result<Action> {
    run.phase = Some(VerificationPhase::Error);
    run.completed_at = Some(now());
    run.message = Some(message);
    record(ctx, backup, run).await
}

/// Writes a finished verification, its Event and its metrics.
async fn record(ctx: &Context, backup: &Backup, result: Verification) -> Result<Action> {
    let reason = verification::reason(&result);
    let message = result.message.clone().unwrap_or_default();
    ctx.metrics
        .verification_finished(reason, result.duration_seconds);
    let passed = result.phase == Some(VerificationPhase::Passed);
    write(ctx, backup, result).await?;
    let event = if passed {
        normal(reason, ACTION, message)
    } else {
        warning(reason, ACTION, message)
    };
    events::publish(&ctx.recorder, backup, event).await;
    Ok(Action::await_change())
}

async fn write(ctx: &Context, backup: &Backup, run: Verification) -> Result<()> {
    let old = backup.status.as_ref();
    let status = verification::with_verification(old, run, &now());
    crate::runtime::status::write(&ctx.client, backup, old, &status).await?;
    Ok(())
}
