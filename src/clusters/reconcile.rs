//! One reconcile of one cluster: validate → build and apply children → status, with an Event
//! for every write and every error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{debug, info, warn};

use super::backup_summary;
use super::children::apply_children;
use super::cleanup;
use super::desired::desired;
use super::freshness::{self, Freshness};
use super::primary;
use super::primary_events::publish_primary;
use super::report::{publish, report_error, update_status, write_events};
use super::restore;
use super::scheduled_runs::record_scheduled_runs;
use super::status::{BACKUP_OVERDUE, BackupSchedule, Outcome, RestoreProgress};
use super::storage::{EXPANSION_NOT_SUPPORTED, StorageProgress};
use super::switchover;
use super::validate::validate;
use super::verify_step;
use crate::crd::conditions::{LAST_BACKUP_SUCCEEDED, RESTORED, STORAGE_RESIZED};
use crate::crd::{Backup, Phase, PostgreSQL};
use crate::error::{Error, Result};
use crate::resources::Cluster;
use crate::runtime::Context;
use crate::runtime::apply::Change;
use crate::runtime::events::{normal, warning};
use crate::runtime::status::STALE_COPY_RETRY;

/// Healthy clusters are re-checked this often even without a watch event.
const RESYNC: Duration = Duration::from_secs(600);
/// How long a reconcile waits for the child caches after the operator starts.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// The controller's reconcile function.
pub async fn reconcile(pg: Arc<PostgreSQL>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let key = ObjectRef::from_obj(pg.as_ref());
    let result = match reconcile_cluster(&pg, &ctx).await {
        // The namespace and the cluster are going away: no Warning, no retry.
        Err(error) if error.is_namespace_terminating() => {
            debug!(cluster = %pg.name_any(), namespace = ?pg.namespace(), "namespace terminating; nothing to do");
            Ok(Action::await_change())
        }
        // The cached copy predates a write (most often the last reconcile's status): its
        // status would have undone that write, so none was written. Status writes do not
        // trigger reconciles, hence the requeue; by then the cache has the newer copy.
        Err(error) if error.is_stale_copy() => {
            debug!(cluster = %pg.name_any(), namespace = ?pg.namespace(), "status computed from a stale copy; again with the newer one");
            ctx.metrics.reconciled("StaleCopy", started.elapsed());
            return Ok(Action::requeue(STALE_COPY_RETRY));
        }
        other => other,
    };
    let label = match &result {
        Ok(_) => "success",
        Err(e) => e.reason(),
    };
    ctx.metrics.reconciled(label, started.elapsed());
    match &result {
        Ok(_) => ctx.backoff.reset(&key),
        Err(error) => report_error(&pg, &ctx, error).await,
    }
    result
}

/// The controller's error policy: per-object exponential backoff with jitter.
pub fn error_policy(pg: Arc<PostgreSQL>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = retry_delay(&pg, &ctx);
    warn!(cluster = %pg.name_any(), namespace = ?pg.namespace(), %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// Records one more failure of `pg` and returns how long to wait before retrying it.
pub fn retry_delay(pg: &PostgreSQL, ctx: &Context) -> Duration {
    ctx.backoff.next_delay(&ObjectRef::from_obj(pg))
}

async fn reconcile_cluster(pg: &PostgreSQL, ctx: &Context) -> Result<Action> {
    let cluster = Cluster::new(pg)?;
    if pg.meta().deletion_timestamp.is_some() {
        // Children go with the owner (garbage collection); only the bucket needs us.
        return cleanup::finalize(pg, ctx).await;
    }
    // Backups start, and clients are routed, only once a restore (if any) has finished.
    let restore_pending = cluster.spec.restore.is_some()
        && pg.status.as_ref().is_none_or(|s| s.restored_from.is_none());
    // Validate, then build every child: both pure, and both refuse before anything is applied.
    let built =
        validate(&pg.spec).and_then(|()| Ok(desired(&cluster, &ctx.agent, restore_pending)?));
    let children = match built {
        Ok(children) => children,
        Err(invalid) => {
            let message = invalid.to_string();
            if update_status(pg, &cluster, &Outcome::InvalidSpec(message.clone()), ctx).await? {
                publish(ctx, pg, warning("InvalidSpec", "Validate", message)).await;
            }
            // Retrying cannot help; the next spec change triggers a new reconcile.
            return Ok(Action::await_change());
        }
    };

    match tokio::time::timeout(CACHE_SYNC_TIMEOUT, ctx.caches.children_ready()).await {
        Ok(Ok(())) => {}
        _ => return Err(Error::CachesNotSynced(CACHE_SYNC_TIMEOUT)),
    }
    let wants_finalizer = cleanup::wants_finalizer(pg);
    let patched;
    let pg = if wants_finalizer != cleanup::has_finalizer(pg) {
        patched = cleanup::set_finalizer(pg, ctx, wants_finalizer).await?;
        &patched
    } else {
        pg
    };
    let mut applied = Box::pin(apply_children(&cluster, children, ctx, restore_pending)).await?;
    let (restore, restore_job) = restore::step(pg, &cluster, &applied.readiness, ctx).await?;
    applied.writes.extend(restore_job);
    if matches!(restore, RestoreProgress::Finished(_)) {
        // Ready must not be reported while the `-rw` Service still holds clients back (or the
        // CronJob waits): route them in this reconcile, before the status says Restored.
        let routed = desired(&cluster, &ctx.agent, false).map_err(|e| {
            Error::Invariant(format!(
                "the children built while restoring, not after: {e}"
            ))
        })?;
        let mut routed = apply_children(&cluster, routed, ctx, false).await?;
        routed.writes.splice(0..0, applied.writes);
        applied = routed;
    }
    // Boxed: the reconcile future is large enough to overflow a test thread's stack.
    let primary = Box::pin(primary::step(pg, &cluster, ctx)).await?;
    applied.writes.extend(primary.writes.iter().cloned());
    applied
        .writes
        .extend(record_scheduled_runs(&cluster, ctx).await?);
    // A database that has served once was initialised with the old Secret's password.
    let previously_provisioned = pg
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .is_some_and(|p| matches!(p, Phase::Ready | Phase::Degraded));
    for event in write_events(&applied.writes) {
        publish(ctx, pg, event).await;
    }
    for write in &applied.writes {
        let (kind, name, action) = (write.kind(), write.name(), write.change.as_str());
        ctx.metrics.child_written(kind, &action.to_lowercase());
        info!(cluster = %cluster.name, namespace = %cluster.namespace, kind, name, action, "child written");
        if kind == "Secret" && write.change == Change::Created && previously_provisioned {
            let note = format!(
                "Secret {name} was missing and has been re-created with a new password; the \
                 database still has the old one: restore the Secret or set the new password with \
                 ALTER ROLE"
            );
            publish(ctx, pg, warning("SecretRecreated", "Created", note)).await;
        }
    }

    let was_ready = pg.is_ready();
    let backups = ctx.caches.backups.state();
    let own: Vec<&Backup> = backups
        .iter()
        .map(AsRef::as_ref)
        .filter(|b| b.namespace().as_deref() == Some(cluster.namespace))
        .filter(|b| b.spec.cluster.name == cluster.name)
        .collect();
    let mut backups = backup_summary::summarize(own.iter().copied(), cluster.name);
    let verify_at = verify_step::step(pg, &cluster, &own, &mut backups, ctx).await?;
    let freshness = match (&cluster.spec.backup, applied.backup) {
        (Some(policy), BackupSchedule::Scheduled) => {
            let since = freshness::since(pg.status.as_ref(), backups.last_successful.as_ref());
            freshness::check(&policy.schedule, since, Timestamp::now())
        }
        _ => Freshness::Unknown,
    };
    if let Freshness::Overdue { message } = &freshness {
        backups.overdue = Some(message.clone());
    }
    let outcome = Outcome::Applied {
        readiness: applied.readiness,
        backup: applied.backup,
        restore: restore.clone(),
        backups: Box::new(backups),
        storage: applied.storage.clone(),
        primary: Box::new(primary.clone()),
    };
    update_status(pg, &cluster, &outcome, ctx).await?;
    if primary.request_done {
        switchover::clear_request(pg, ctx).await?;
    }
    publish_restore(pg, ctx, &restore).await;
    publish_overdue(pg, ctx, &freshness).await;
    publish_storage(pg, ctx, applied.storage.as_ref()).await;
    publish_primary(pg, ctx, &primary).await;
    let serving = applied.readiness.ready && restore.allows_ready();
    if serving && !was_ready {
        let note = applied.readiness.message();
        publish(ctx, pg, normal("Ready", "Reconcile", note)).await;
        let first_time = pg
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .is_none_or(|p| p == Phase::Provisioning);
        if let (true, Some(created)) = (first_time, pg.meta().creation_timestamp.as_ref()) {
            let elapsed = Timestamp::now().duration_since(created.0);
            ctx.metrics
                .first_ready(Duration::try_from(elapsed).unwrap_or_default());
        }
    } else if !serving && was_ready {
        let note = applied.readiness.message();
        publish(ctx, pg, warning("NotReady", "Reconcile", note)).await;
    }
    let now = Timestamp::now();
    let until_verify = verify_at
        .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
        .map(|d| d + Duration::from_secs(1));
    let recheck = [until_verify, primary.recheck]
        .into_iter()
        .flatten()
        .fold(next_check(&freshness, now), Duration::min);
    Ok(Action::requeue(recheck))
}

/// The resync interval, or sooner when backups turn overdue before it: the condition changes
/// even though no event arrives.
fn next_check(freshness: &Freshness, now: Timestamp) -> Duration {
    let Freshness::Fresh { overdue_at } = freshness else {
        return RESYNC;
    };
    let until = Duration::try_from(overdue_at.duration_since(now)).unwrap_or_default();
    (until + Duration::from_secs(1)).min(RESYNC)
}

/// Whether `pg`'s condition `type_` already has `reason`: its Warning was published then.
fn has_reason(pg: &PostgreSQL, type_: &str, reason: &str) -> bool {
    pg.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.reason == reason)
    })
}

/// A Warning when the volumes cannot grow, once: the condition records that it was published.
async fn publish_storage(pg: &PostgreSQL, ctx: &Context, storage: Option<&StorageProgress>) {
    let Some(StorageProgress::NotExpandable { message }) = storage else {
        return;
    };
    if !has_reason(pg, STORAGE_RESIZED, EXPANSION_NOT_SUPPORTED) {
        let event = warning(EXPANSION_NOT_SUPPORTED, "Reconcile", message.clone());
        publish(ctx, pg, event).await;
    }
}

/// A Warning when backups turn overdue, once: the condition records that it was published.
async fn publish_overdue(pg: &PostgreSQL, ctx: &Context, freshness: &Freshness) {
    let Freshness::Overdue { message } = freshness else {
        return;
    };
    if !has_reason(pg, LAST_BACKUP_SUCCEEDED, BACKUP_OVERDUE) {
        publish(ctx, pg, warning(BACKUP_OVERDUE, "Backup", message.clone())).await;
    }
}

/// Events for the restore's outcomes, once each: the status records that they were published.
async fn publish_restore(pg: &PostgreSQL, ctx: &Context, restore: &RestoreProgress) {
    let previous_reason = pg.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == RESTORED)
            .map(|c| c.reason.clone())
    });
    match restore {
        RestoreProgress::Finished(from) => {
            let note = format!("restored backup {} from {}", from.backup_id, from.location);
            publish(ctx, pg, normal("Restored", "Restore", note)).await;
        }
        RestoreProgress::Failed { reason, message }
            if previous_reason.as_deref() != Some(reason) =>
        {
            publish(ctx, pg, warning(reason, "Restore", message.clone())).await;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rechecks_when_backups_would_turn_overdue_before_the_resync() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let soon = Freshness::Fresh {
            overdue_at: Timestamp::from_second(1_000_090).unwrap(),
        };
        assert_eq!(next_check(&soon, now), Duration::from_secs(91));
        let later = Freshness::Fresh {
            overdue_at: Timestamp::from_second(2_000_000).unwrap(),
        };
        assert_eq!(next_check(&later, now), RESYNC);
        assert_eq!(next_check(&Freshness::Unknown, now), RESYNC);
    }
}
