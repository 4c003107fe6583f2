//! One reconcile of one Backup: decide the next step (see `progress`), do it, write the status.

use std::sync::Arc;
use std::time::{Duration, Instant};

use backup_store::Manifest;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::Event;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use super::progress::{self, Next};
use super::retention;
use super::status::{self, Record};
use crate::clusters::ha::pods::{cluster_pods, known_instance_address};
use crate::crd::{Backup, BackupMethod, BackupPhase, BackupStatus, Destination, PostgreSQL};
use crate::error::{Error, Result};
use crate::resources::{self, Cluster};
use crate::runtime::apply::{Change, create};
use crate::runtime::buckets::{BucketError, cluster_location};
use crate::runtime::events::{self, normal, warning};
use crate::runtime::jobs::{AgentExit, JobState, deadline_exceeded, failed_agent, job_state};
use crate::runtime::settle::{Settled, settle};
use crate::runtime::status::now;
use crate::runtime::{Context, cached};

/// The action of every Event about a Backup.
const ACTION: &str = "Backup";
/// How often a Pending backup re-checks its cluster.
const PENDING_RECHECK: Duration = Duration::from_secs(10);
/// How long a finished Job's manifest may stay unreadable before the backup is Failed.
const STORE_GRACE: Duration = Duration::from_secs(600);

/// The Backup controller's reconcile function.
pub async fn reconcile(backup: Arc<Backup>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let result = reconcile_backup(&backup, &ctx).await;
    let settled = settle(backup.as_ref(), &ctx.backup_backoff, result);
    let label = settled.label();
    ctx.metrics.backup_reconciled(label);
    tracing::debug!(backup = %backup.name_any(), took = ?started.elapsed(), result = label, "backup reconciled");
    if let Settled::Failed(error) = &settled {
        let event = warning(error.reason(), ACTION, error.to_string());
        publish(&ctx, &backup, event).await;
    }
    settled.into_result()
}

/// The Backup controller's error policy: per-object exponential backoff with jitter.
pub fn error_policy(backup: Arc<Backup>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx
        .backup_backoff
        .next_delay(&ObjectRef::from_obj(backup.as_ref()));
    warn!(backup = %backup.name_any(), namespace = ?backup.namespace(), %error, retry_in = ?delay, "backup reconcile failed");
    Action::requeue(delay)
}

async fn reconcile_backup(backup: &Backup, ctx: &Context) -> Result<Action> {
    match backup.phase() {
        BackupPhase::Completed => return super::verify::reconcile(backup, ctx).await,
        BackupPhase::Failed => return Ok(Action::await_change()),
        BackupPhase::Pending | BackupPhase::Running => {}
    }
    let (name, ns) = (backup.name_any(), backup.namespace().unwrap_or_default());
    let cluster = cached(&ctx.caches.clusters, &ns, &backup.spec.cluster.name);
    let job = cached(&ctx.caches.jobs, &ns, &name);
    let old = backup.status.as_ref();
    let now = now();
    let agent = match job.as_deref() {
        Some(job) => failed_agent_of(ctx, job).await?,
        None => None,
    };
    match progress::next(backup, cluster.as_deref(), job.as_deref(), agent.as_ref()) {
        Next::Wait { reason, message } => {
            write_status(ctx, backup, status::pending(old, reason, message, &now)).await?;
            Ok(Action::requeue(PENDING_RECHECK))
        }
        Next::Fail { reason, message } => fail(ctx, backup, reason, message).await,
        Next::CreateJob => {
            // `next` only asks for a Job when the cluster exists and has a destination.
            let Some(pg) = cluster.as_deref() else {
                return Ok(Action::requeue(PENDING_RECHECK));
            };
            let destination = start_job(ctx, backup, pg).await?;
            let running = status::running(old, &name, None, &destination, &now);
            write_status(ctx, backup, running).await?;
            let note = format!("started Job {name}");
            publish(ctx, backup, normal("Started", ACTION, note)).await;
            Ok(Action::await_change())
        }
        Next::JobGone => {
            let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
            let read = |source| Error::Read {
                kind: "Job".into(),
                name: name.clone(),
                source,
            };
            if jobs.get_opt(&name).await.map_err(read)?.is_some() {
                // Only the cache is behind; its next event triggers us again.
                return Ok(Action::requeue(Duration::from_secs(2)));
            }
            let message =
                format!("Job {name} no longer exists; the outcome of this backup is unknown");
            fail(ctx, backup, "JobMissing", message).await
        }
        Next::Running { started } => {
            let Some(destination) = destination_of(backup, cluster.as_deref()) else {
                let message = "neither the Backup nor its cluster names a destination".to_owned();
                return fail(ctx, backup, "NoDestination", message).await;
            };
            let running = status::running(old, &name, started, &destination, &now);
            write_status(ctx, backup, running).await?;
            Ok(Action::await_change())
        }
        Next::ReadManifest { finished } => {
            let Some(destination) = destination_of(backup, cluster.as_deref()) else {
                let message = "neither the Backup nor its cluster names a destination".to_owned();
                return fail(ctx, backup, "NoDestination", message).await;
            };
            complete(ctx, backup, cluster.as_deref(), &destination, finished).await
        }
    }
}

/// How the agent of `job` ended, read from its pod once the Job failed (the Backup's failure is
/// final, so the reason is read before it is written). Not for a Job stopped at its deadline:
/// Kubernetes killed the agent, so the deadline is the reason.
async fn failed_agent_of(ctx: &Context, job: &Job) -> Result<Option<AgentExit>> {
    if !matches!(job_state(job), JobState::Failed { .. }) || deadline_exceeded(job) {
        return Ok(None);
    }
    let (name, ns) = (job.name_any(), job.namespace().unwrap_or_default());
    failed_agent(&ctx.client, &ns, &name)
        .await
        .map_err(|source| Error::Read {
            kind: "Pod of Job".into(),
            name,
            source,
        })
}

/// The destination the backup writes to: recorded in the status once running, the cluster's
/// before that.
fn destination_of(backup: &Backup, cluster: Option<&PostgreSQL>) -> Option<Destination> {
    backup
        .status
        .as_ref()
        .and_then(|s| s.destination.clone())
        .or_else(|| cluster?.spec.backup.as_ref().map(|b| b.destination.clone()))
}

/// Creates the Backup's Job; an existing one (a concurrent reconcile) is kept.
async fn start_job(ctx: &Context, backup: &Backup, pg: &PostgreSQL) -> Result<Destination> {
    let cluster = Cluster::new(pg)?;
    let name = backup.name_any();
    let Some(policy) = &pg.spec.backup else {
        return Err(Error::Invariant(format!(
            "PostgreSQL {} lost spec.backup",
            cluster.name
        )));
    };
    let Some(owner) = backup.controller_owner_ref(&()) else {
        return Err(Error::Invariant(format!("Backup {name} has no uid")));
    };
    let job = match backup.spec.method {
        BackupMethod::Logical => resources::backup_job(&cluster, policy, &ctx.agent, &name, owner),
        BackupMethod::Physical => {
            let source = resources::base_backup_source(pg, &cluster);
            resources::base_backup_job(&cluster, policy, &ctx.agent, &name, owner, &source)
        }
    };
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    if create(&api, &job).await? == Change::Created {
        info!(backup = %name, namespace = %cluster.namespace, "backup Job created");
    }
    Ok(policy.destination.clone())
}

/// The Job succeeded: the backup is Completed only if its manifest is in the bucket.
async fn complete(
    ctx: &Context,
    backup: &Backup,
    cluster: Option<&PostgreSQL>,
    destination: &Destination,
    finished: Option<Time>,
) -> Result<Action> {
    let (name, ns) = (backup.name_any(), backup.namespace().unwrap_or_default());
    let cluster_name = &backup.spec.cluster.name;
    let location =
        cluster_location(destination, &ns, cluster_name).map_err(|source| Error::Bucket {
            name: name.clone(),
            source,
        })?;
    let read = async {
        let store = ctx.buckets.open(&ns, destination).await?;
        let key = location.manifest_key(&name);
        let bytes = backup_store::store::get_bytes(store.as_ref(), &key).await;
        Ok::<_, BucketError>((store.location(), bytes))
    };
    let (store_location, bytes) = match read.await {
        Ok((store_location, Ok(bytes))) => (store_location, bytes),
        Ok((store_location, Err(e))) if e.is_not_found() => {
            let message = format!(
                "Job {name} succeeded but {store_location}/{} has no manifest.json: the backup does not exist",
                location.backup_prefix(&name)
            );
            return fail(ctx, backup, "ManifestMissing", message).await;
        }
        Ok((_, Err(e))) => return store_trouble(ctx, backup, finished, e.into()).await,
        Err(e) => return store_trouble(ctx, backup, finished, e).await,
    };
    let manifest = match Manifest::from_json(&bytes) {
        Ok(m)
            if m.backup_id == name
                && m.namespace == ns
                && &m.cluster == cluster_name
                && m.physical.is_some() == (backup.spec.method == BackupMethod::Physical) =>
        {
            m
        }
        Ok(m) => {
            let kind = if m.physical.is_some() {
                "physical"
            } else {
                "logical"
            };
            let message = format!(
                "the manifest at {} describes {kind} backup {} of {}/{}, not this one",
                location.manifest_key(&name),
                m.backup_id,
                m.namespace,
                m.cluster
            );
            return fail(ctx, backup, "ManifestMismatch", message).await;
        }
        Err(e) => {
            let message = format!(
                "the manifest at {} is not valid: {e}",
                location.manifest_key(&name)
            );
            return fail(ctx, backup, "ManifestInvalid", message).await;
        }
    };
    let record = Record {
        manifest: &manifest,
        manifest_sha256: hex::encode(Sha256::digest(&bytes)),
        location: format!("{store_location}/{}", location.backup_prefix(&name)),
    };
    let completed = status::completed(backup.status.as_ref(), &record, &now());
    write_status(ctx, backup, completed).await?;
    let note = format!(
        "{} bytes at {}",
        manifest.total_size_bytes(),
        record.location
    );
    publish(ctx, backup, normal("Completed", ACTION, note)).await;
    if let Some(pg) = cluster {
        if backup.spec.method == BackupMethod::Physical {
            ask_primary_for_check(ctx, pg, &name).await;
        }
        retention::apply(ctx, pg, backup).await;
    }
    Ok(Action::await_change())
}

/// A base backup read from a standby (the default with replicas) leaves no backup history
/// file in the primary's archive, the manager's signal for the restore point the backup's
/// verification recovers to and for the continuity check after it: the primary's manager is
/// asked directly. Best effort: without it, the hourly check comes later and the verification
/// replays to the end of the archive without counts to compare.
async fn ask_primary_for_check(ctx: &Context, pg: &PostgreSQL, backup: &str) {
    let Ok(cluster) = Cluster::new(pg) else {
        return;
    };
    let Some(primary) = pg.status.as_ref().and_then(|s| s.current_primary.clone()) else {
        return;
    };
    let pods = cluster_pods(ctx, &cluster);
    let address = pods
        .iter()
        .find(|pod| pod.name == primary)
        .and_then(|pod| known_instance_address(ctx, &cluster, pod));
    let asked = match address {
        Some(address) => ctx.instances.ask_archive_check(&address).await,
        None => false,
    };
    if !asked {
        info!(backup, pod = %primary, "the primary's manager did not take the request for a continuity check; its hourly check follows");
    }
}

/// A bucket that cannot be read: retried with backoff, and Failed once it has stayed
/// unreachable for [`STORE_GRACE`] after the Job finished.
async fn store_trouble(
    ctx: &Context,
    backup: &Backup,
    finished: Option<Time>,
    error: BucketError,
) -> Result<Action> {
    let waited = finished
        .map(|t| Timestamp::now().duration_since(t.0))
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default();
    if waited > STORE_GRACE {
        let message = format!("the manifest could not be read for {waited:?}: {error}");
        return fail(ctx, backup, "StoreUnreachable", message).await;
    }
    Err(Error::Bucket {
        name: backup.name_any(),
        source: error,
    })
}

async fn fail(
    ctx: &Context,
    backup: &Backup,
    reason: &'static str,
    message: String,
) -> Result<Action> {
    let failed = status::failed(backup.status.as_ref(), reason, message.clone(), &now());
    write_status(ctx, backup, failed).await?;
    ctx.metrics.backup_finished(reason);
    publish(ctx, backup, warning(reason, ACTION, message)).await;
    Ok(Action::await_change())
}

/// Applies the status when it differs from the current one.
async fn write_status(ctx: &Context, backup: &Backup, status: BackupStatus) -> Result<()> {
    crate::runtime::status::write(&ctx.client, backup, backup.status.as_ref(), &status).await?;
    Ok(())
}

async fn publish(ctx: &Context, backup: &Backup, event: Event) {
    events::publish(&ctx.recorder, backup, event).await;
}
