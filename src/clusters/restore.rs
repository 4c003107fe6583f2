//! `spec.restore`: once the new cluster's database serves, a Job runs `backup-agent restore`
//! into it. `Restored` becomes True when the Job succeeds, and only then `Ready`. A restore runs
//! once: `status.restoredFrom` records it and is never cleared. With a `target` the restore is
//! physical and happens in the first pod (`resources::point_in_time`): no Job, and `Restored`
//! once the database serves, which it does only after recovering to the target.

use backup_store::{ClusterLocation, catalog};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;

use super::readiness::Readiness;
use super::restore_certificate;
use super::restore_window;
use super::status::RestoreProgress;
use crate::crd::{BackupPhase, PostgreSQL, RestoreSource, RestoreTarget, RestoredFrom};
use crate::error::{Error, Result};
use crate::resources::{self, Cluster, Layout, RestorePlan};
use crate::runtime::apply::{Written, create};
use crate::runtime::buckets::{BucketError, bucket_url, cluster_location};
use crate::runtime::jobs::{AgentExit, JobState, failed_agent, failure_message, job_state};
use crate::runtime::{Context, cached};

/// How soon a refused point-in-time restore is checked again while the source may lift it.
const RECHECK_REFUSED: std::time::Duration = std::time::Duration::from_secs(10);
/// How soon a point-in-time restore under way is looked at again.
const RECHECK_RECOVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Where the restore stands before this reconcile applies anything.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// Decided without the database: nothing to restore, restored before, or the restore
    /// Job's own state.
    Known(RestoreProgress),
    /// No restore Job yet: one starts once the database serves ([`start`]).
    NotStarted,
    /// A point-in-time restore whose target cannot be reached (`restore_window`): no pod may
    /// start restoring, so the StatefulSet is held at none.
    Refused(RestoreProgress),
}

impl Observed {
    /// Whether clients and backups are held back: until a restore (if any) has finished.
    pub fn holds_clients(&self) -> bool {
        match self {
            Self::Known(progress) => !progress.allows_ready(),
            Self::NotStarted | Self::Refused(_) => true,
        }
    }

    /// How soon to look again: a refusal the source's archive may lift (it keeps archiving) is
    /// checked again soon, not at the resync, and so is a recovery under way (its failures are
    /// read from the first instance, which no watch event announces).
    pub fn recheck(&self) -> Option<std::time::Duration> {
        match self {
            Self::Refused(RestoreProgress::Pending { .. }) => Some(RECHECK_REFUSED),
            Self::Known(RestoreProgress::Pending { reason, .. })
                if matches!(*reason, "Recovering" | "RestoreFailed") =>
            {
                Some(RECHECK_RECOVERY)
            }
            _ => None,
        }
    }

    /// Whether the database pods are held back: a refused point-in-time restore.
    pub fn holds_pods(&self) -> bool {
        matches!(self, Self::Refused(_))
    }

    /// Where the restore stands, when this reconcile starts nothing.
    pub fn progress(self) -> Option<RestoreProgress> {
        match self {
            Self::Known(progress) | Self::Refused(progress) => Some(progress),
            Self::NotStarted => None,
        }
    }
}

/// Where the restore of `pg` stands, from its status and its Job (read from the cache).
pub async fn observe(pg: &PostgreSQL, cluster: &Cluster<'_>, ctx: &Context) -> Result<Observed> {
    if cluster.spec.restore.is_none() {
        return Ok(Observed::Known(RestoreProgress::NotRequested));
    }
    if pg
        .status
        .as_ref()
        .is_some_and(|s| s.restored_from.is_some())
    {
        return Ok(Observed::Known(RestoreProgress::Done));
    }
    if let Some(observed) = point_in_time_progress(cluster, ctx).await? {
        return Ok(observed);
    }
    let name = cluster.restore_job_name();
    let Some(job) = cached(&ctx.caches.jobs, cluster.namespace, &name) else {
        return Ok(Observed::NotStarted);
    };
    // A failed restore says why: its agent's reason is read from the Job's pod.
    let agent = match job_state(&job) {
        JobState::Failed { .. } => failed_agent(&ctx.client, cluster.namespace, &name)
            .await
            .map_err(|source| Error::Read {
                kind: "Pod of Job".into(),
                name: name.clone(),
                source,
            })?,
        _ => None,
    };
    Ok(Observed::Known(job_progress(pg, &job, agent.as_ref())))
}

/// Starts the restore Job of a cluster whose restore has not started, once its database
/// serves (`readiness`); returns where the restore stands and what it wrote (the superuser's
/// certificate for the Job, and the Job).
pub async fn start(
    cluster: &Cluster<'_>,
    readiness: &Readiness,
    ctx: &Context,
) -> Result<(RestoreProgress, Vec<Written>)> {
    let Some(source) = &cluster.spec.restore else {
        return Ok((RestoreProgress::NotRequested, Vec::new()));
    };
    let plan = match plan(source, cluster, ctx) {
        Ok(plan) => plan,
        Err(progress) => return Ok((progress, Vec::new())),
    };
    if !readiness.ready {
        let message = format!(
            "the restore starts once the database serves: {}",
            readiness.message()
        );
        return Ok((waiting("WaitingForDatabase", message), Vec::new()));
    }
    // A Backup's status was written from its manifest; a bucket named in the spec is checked.
    let plan = if source.object_store.is_some() {
        match resolve_latest(plan, cluster, ctx).await? {
            Ok(plan) => plan,
            Err(progress) => return Ok((progress, Vec::new())),
        }
    } else {
        plan
    };
    // The restore logs in as the superuser: with certificates the user brings, only if the
    // spec lets the superuser in over the network at all.
    if cluster.user_server_secret().is_some() && !cluster.spec.superuser_access {
        let message = "a logical restore logs in as the superuser over the network, which \
                       spec.superuserAccess: true allows (with certificates you bring in \
                       spec.tls, Tusk cannot issue the restore a certificate of its own)"
            .to_owned();
        return Ok((waiting("SuperuserAccessNeeded", message), Vec::new()));
    }
    let deadline = resources::restore_deadline_seconds(cluster);
    let mut written: Vec<Written> = restore_certificate::issue(cluster, ctx, deadline)
        .await?
        .into_iter()
        .collect();
    let job = resources::restore_job(cluster, &plan, &ctx.agent);
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    written.extend(Written::of(&job, create(&api, &job).await?));
    let message = format!(
        "restoring backup {} of {}/{}",
        plan.backup_id, plan.layout.namespace, plan.layout.cluster
    );
    Ok((waiting("Restoring", message), written))
}

/// A point-in-time restore runs in the first pod, with no Job: where it stands, from the
/// cached StatefulSet (so clients are routed in the reconcile that sees it done). Before its
/// pods exist the target is checked against the source's bucket, and refused if unreachable.
async fn point_in_time_progress(cluster: &Cluster<'_>, ctx: &Context) -> Result<Option<Observed>> {
    let Some(source) = cluster.spec.restore.as_ref() else {
        return Ok(None);
    };
    let Some(target) = source.target.as_ref() else {
        return Ok(None);
    };
    let plan = match plan(source, cluster, ctx) {
        Ok(plan) => plan,
        Err(progress) => return Ok(Some(Observed::Known(progress))),
    };
    let sts = ctx
        .caches
        .statefulsets
        .object(cluster.namespace, &cluster.statefulset_name());
    let has_pods = (sts.as_deref().and_then(|s| s.spec.replicas)).is_some_and(|n| n > 0);
    if !has_pods {
        let checked = restore_window::check(&plan, target, cluster, ctx).await;
        let refusal = checked.map_err(|source| Error::Bucket {
            name: cluster.name.to_owned(),
            source,
        })?;
        if let Some(refusal) = refusal {
            let progress = match refusal.retry {
                true => waiting(refusal.reason, refusal.message),
                false => failed(refusal.reason, refusal.message),
            };
            return Ok(Some(Observed::Refused(progress)));
        }
    }
    let serving = sts
        .as_deref()
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.ready_replicas)
        .is_some_and(|ready| ready >= 1);
    let failure = match serving {
        true => None,
        false => restore_failure(cluster, ctx).await,
    };
    Ok(Some(Observed::Known(recovery_progress(
        &plan, target, serving, failure,
    ))))
}

/// Why the first instance's last restore attempt failed, as its manager reports it (none
/// while it has not failed, or cannot be read).
async fn restore_failure(cluster: &Cluster<'_>, ctx: &Context) -> Option<String> {
    let first = format!("{}-0", cluster.statefulset_name());
    let pod = (ctx.caches.pods).with(cluster.namespace, &first, Clone::clone)?;
    let address = super::ha::pods::instance_address(cluster, &pod)?;
    let error = ctx.instances.report(&address).await?.restore_error?;
    Some(format!("{first}: {error}"))
}

/// Where a point-in-time restore stands: done once the database serves, since the first
/// instance serves only after it has recovered to the target and promoted; `failure`: why its
/// last attempt failed.
fn recovery_progress(
    plan: &RestorePlan,
    target: &RestoreTarget,
    serving: bool,
    failure: Option<String>,
) -> RestoreProgress {
    let (namespace, name) = (&plan.layout.namespace, &plan.layout.cluster);
    if serving {
        let bucket = match (&plan.destination.s3, &plan.destination.gcs) {
            (Some(s3), _) => bucket_url(false, &s3.bucket),
            (None, Some(gcs)) => bucket_url(true, &gcs.bucket),
            (None, None) => String::new(),
        };
        let location = match cluster_location(&plan.destination, namespace, name) {
            Ok(at) => format!("{bucket}/{}", at.backup_prefix(&plan.backup_id)),
            Err(_) => bucket,
        };
        return RestoreProgress::Finished(RestoredFrom {
            backup_id: plan.backup_id.clone(),
            location,
            restored_at: Time(Timestamp::now()),
        });
    }
    if let Some(failure) = failure {
        let message = format!(
            "{failure}; the instance retries it with backoff (fix the source or the target, \
             or delete this cluster)"
        );
        return waiting("RestoreFailed", message);
    }
    let to = match target.variable() {
        Some((_, point)) => format!("to {point}"),
        None => "to the end of the archive".to_owned(),
    };
    let message = format!(
        "the first instance restores base backup {} of {namespace}/{name} and replays the WAL \
         archive {to}; it serves once promoted there (its pod's Events and log tell the progress \
         and any error)",
        plan.backup_id
    );
    waiting("Recovering", message)
}

fn waiting(reason: &'static str, message: String) -> RestoreProgress {
    RestoreProgress::Pending { reason, message }
}

fn failed(reason: &'static str, message: String) -> RestoreProgress {
    RestoreProgress::Failed { reason, message }
}

/// Where the backup to restore is, from a Backup in this namespace or a bucket named in the spec.
fn plan(
    source: &RestoreSource,
    cluster: &Cluster,
    ctx: &Context,
) -> Result<RestorePlan, RestoreProgress> {
    if let Some(store) = &source.object_store {
        return Ok(RestorePlan {
            destination: store.destination.clone(),
            layout: Layout {
                namespace: store
                    .namespace
                    .clone()
                    .unwrap_or_else(|| cluster.namespace.to_owned()),
                cluster: store.cluster.clone(),
            },
            backup_id: store.backup_id.clone(),
        });
    }
    let Some(reference) = &source.backup else {
        return Err(failed(
            "InvalidSpec",
            "spec.restore needs backup or objectStore".into(),
        ));
    };
    let Some(backup) = cached(&ctx.caches.backups, cluster.namespace, &reference.name) else {
        let message = format!("Backup {} does not exist in this namespace", reference.name);
        return Err(waiting("BackupNotFound", message));
    };
    let status = backup.status.clone().unwrap_or_default();
    match backup.phase() {
        BackupPhase::Completed => {}
        BackupPhase::Failed => {
            let message = format!("Backup {} failed and cannot be restored", reference.name);
            return Err(failed("BackupFailed", message));
        }
        phase => {
            let message = format!(
                "Backup {} is {phase:?}; the restore waits for it to complete",
                reference.name
            );
            return Err(waiting("BackupNotCompleted", message));
        }
    }
    let Some(destination) = status.destination else {
        let message = format!(
            "Backup {} does not record where it was written",
            reference.name
        );
        return Err(failed("BackupIncomplete", message));
    };
    Ok(RestorePlan {
        destination,
        layout: Layout {
            namespace: cluster.namespace.to_owned(),
            cluster: backup.spec.cluster.name.clone(),
        },
        backup_id: status.backup_id.unwrap_or_else(|| reference.name.clone()),
    })
}

/// Checks the backup exists and pins `latest` to an id, so the Job and the status name exactly
/// what is restored.
async fn resolve_latest(
    mut plan: RestorePlan,
    cluster: &Cluster<'_>,
    ctx: &Context,
) -> Result<Result<RestorePlan, RestoreProgress>> {
    let bucket_error = |source: BucketError| Error::Bucket {
        name: cluster.name.to_owned(),
        source,
    };
    let location = cluster_location(
        &plan.destination,
        &plan.layout.namespace,
        &plan.layout.cluster,
    )
    .map_err(bucket_error)?;
    let store = ctx
        .buckets
        .open(cluster.namespace, &plan.destination)
        .await
        .map_err(bucket_error)?;
    match catalog::resolve(
        store.as_ref(),
        &location,
        &plan.backup_id,
        Some(backup_store::manifest::Method::Logical),
    )
    .await
    {
        Ok(manifest) => {
            plan.backup_id = manifest.backup_id;
            Ok(Ok(plan))
        }
        Err(backup_store::CatalogError::BackupNotFound(what)) => {
            let message = format!(
                "no complete backup {what} under {}{}",
                store.location(),
                location.prefix()
            );
            Ok(Err(failed("BackupNotFound", message)))
        }
        // A base backup named where a dump is restored: not retried, the user must choose.
        Err(e @ backup_store::CatalogError::WrongMethod { .. }) => {
            Ok(Err(failed("NotALogicalBackup", e.to_string())))
        }
        Err(e) => Err(bucket_error(e.into())),
    }
}

/// Where the restore Job stands; `agent` is how its agent ended, once it failed.
fn job_progress(pg: &PostgreSQL, job: &Job, agent: Option<&AgentExit>) -> RestoreProgress {
    let owned = pg
        .uid()
        .is_some_and(|uid| job.owner_references().iter().any(|o| o.uid == uid));
    if !owned {
        let message = format!(
            "a Job named {} exists and was not created for this cluster",
            job.name_any()
        );
        return failed("JobConflict", message);
    }
    match job_state(job) {
        JobState::Active { .. } => {
            waiting("Restoring", format!("Job {} is restoring", job.name_any()))
        }
        JobState::Failed { message } => failed(
            "RestoreFailed",
            format!(
                "restore Job {} failed: {message}. Each database is restored in its own \
                 transaction; the reason above says what was applied. Fix the cause, then delete \
                 the Job: the next one undoes what a failed attempt left and starts over",
                job.name_any(),
                message = failure_message(&message, agent),
            ),
        ),
        JobState::Succeeded { finished } => {
            // The Job's environment names exactly what was restored (`latest` was pinned).
            let env = |key: &str| env_value(job, key).unwrap_or_default();
            let bucket = bucket_url(env("TUSK_STORE") == "gcs", &env("TUSK_BUCKET"));
            let restored = ClusterLocation::new(
                &env("TUSK_PATH"),
                &env("TUSK_NAMESPACE"),
                &env("TUSK_CLUSTER"),
            );
            let location = match restored {
                Ok(at) => format!("{bucket}/{}", at.backup_prefix(&env("TUSK_BACKUP_ID"))),
                Err(_) => bucket,
            };
            RestoreProgress::Finished(RestoredFrom {
                backup_id: env("TUSK_BACKUP_ID"),
                location,
                restored_at: finished.unwrap_or_else(|| Time(Timestamp::now())),
            })
        }
    }
}

/// A literal environment value of the Job's container.
fn env_value(job: &Job, name: &str) -> Option<String> {
    let pod = job.spec.as_ref()?.template.spec.as_ref()?;
    pod.containers
        .first()?
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}
