//! One reconcile of one cluster: validate → build and apply children → status, with an Event
//! for every write and every error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{Timestamp, Unit};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tracing::{debug, info, warn};

use super::apply::FIELD_MANAGER;
use super::children::{WriteAction, Written, apply_children};
use super::cleanup;
use super::conditions::{self, READY};
use super::context::Context;
use super::restore;
use super::status::{self, Outcome, RestoreProgress};
use super::validate::validate;
use crate::backups::{record, summary};
use crate::crd::{Phase, PostgreSQL, PostgreSQLStatus};
use crate::error::{Error, Result};
use crate::resources::Cluster;

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
    if let Err(invalid) = validate(&pg.spec) {
        let message = invalid.to_string();
        if update_status(pg, &cluster, &Outcome::InvalidSpec(message.clone()), ctx).await? {
            publish(
                ctx,
                pg,
                EventType::Warning,
                "InvalidSpec",
                "Validate",
                message,
            )
            .await;
        }
        // Retrying cannot help; the next spec change triggers a new reconcile.
        return Ok(Action::await_change());
    }

    match tokio::time::timeout(CACHE_SYNC_TIMEOUT, ctx.stores.children_ready()).await {
        Ok(Ok(())) => {}
        _ => return Err(Error::CachesNotSynced(CACHE_SYNC_TIMEOUT)),
    }
    let wants_finalizer = cleanup::wants_finalizer(pg);
    if wants_finalizer != cleanup::has_finalizer(pg) {
        cleanup::set_finalizer(pg, ctx, wants_finalizer).await?;
    }
    // Backups start only against a database that serves, which for a restore means restored.
    let restore_pending = cluster.spec.restore.is_some()
        && pg.status.as_ref().is_none_or(|s| s.restored_from.is_none());
    let mut applied = apply_children(&cluster, ctx, restore_pending).await?;
    let (restore, restore_job) = restore::step(pg, &cluster, &applied.readiness, ctx).await?;
    applied.writes.extend(restore_job);
    for name in record::record_scheduled_runs(&cluster, ctx).await? {
        applied.writes.push(Written {
            kind: "Backup",
            name,
            action: WriteAction::Created,
        });
    }
    // A database that has served once was initialised with the old Secret's password.
    let previously_provisioned = pg
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .is_some_and(|p| matches!(p, Phase::Ready | Phase::Degraded));
    for write in &applied.writes {
        let action = match write.action {
            WriteAction::Created => "Created",
            WriteAction::Updated => "Updated",
            WriteAction::Deleted => "Deleted",
        };
        ctx.metrics
            .child_written(write.kind, &action.to_lowercase());
        info!(cluster = %cluster.name, namespace = %cluster.namespace, kind = write.kind, name = %write.name, action, "child written");
        let note = format!("{action} {} {}", write.kind, write.name);
        let related = Some(write.reference(cluster.namespace));
        publish_related(ctx, pg, EventType::Normal, action, action, note, related).await;
        if write.kind == "Secret" && write.action == WriteAction::Created && previously_provisioned
        {
            let note = format!(
                "Secret {} was missing and has been re-created with a new password; the database \
                 still has the old one: restore the Secret or set the new password with ALTER ROLE",
                write.name
            );
            publish(
                ctx,
                pg,
                EventType::Warning,
                "SecretRecreated",
                "Created",
                note,
            )
            .await;
        }
    }

    let was_ready = is_ready(pg.status.as_ref());
    let backups = ctx.stores.backups.state();
    let in_namespace = backups
        .iter()
        .map(AsRef::as_ref)
        .filter(|b| b.namespace().as_deref() == Some(cluster.namespace));
    let outcome = Outcome::Applied {
        readiness: applied.readiness,
        backup: applied.backup,
        restore: restore.clone(),
        backups: summary::summarize(in_namespace, cluster.name),
    };
    update_status(pg, &cluster, &outcome, ctx).await?;
    publish_restore(pg, ctx, &restore).await;
    let serving = applied.readiness.ready && restore.allows_ready();
    if serving && !was_ready {
        let note = applied.readiness.message();
        publish(ctx, pg, EventType::Normal, "Ready", "Reconcile", note).await;
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
        publish(ctx, pg, EventType::Warning, "NotReady", "Reconcile", note).await;
    }
    if matches!(restore, RestoreProgress::Finished(_)) {
        // The CronJob waited for the restore; create it now rather than at the next event.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    Ok(Action::requeue(RESYNC))
}

/// Events for the restore's outcomes, once each: the status records that they were published.
async fn publish_restore(pg: &PostgreSQL, ctx: &Context, restore: &RestoreProgress) {
    let previous_reason = pg.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == conditions::RESTORED)
            .map(|c| c.reason.clone())
    });
    match restore {
        RestoreProgress::Finished(from) => {
            let note = format!("restored backup {} from {}", from.backup_id, from.location);
            publish(ctx, pg, EventType::Normal, "Restored", "Restore", note).await;
        }
        RestoreProgress::Failed { reason, message }
            if previous_reason.as_deref() != Some(reason) =>
        {
            publish(
                ctx,
                pg,
                EventType::Warning,
                reason,
                "Restore",
                message.clone(),
            )
            .await;
        }
        _ => {}
    }
}

fn is_ready(status: Option<&PostgreSQLStatus>) -> bool {
    status.is_some_and(|s| conditions::is_true(&s.conditions, READY))
}

/// Patches the status when it differs from the current one; returns whether it did.
pub(super) async fn update_status(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    outcome: &Outcome,
    ctx: &Context,
) -> Result<bool> {
    // metav1.Time has second precision on the wire; truncating keeps the comparison honest.
    let now = Timestamp::now()
        .round(Unit::Second)
        .unwrap_or_else(|_| Timestamp::now());
    let status = status::compute(
        pg.status.as_ref(),
        cluster,
        pg.metadata.generation,
        outcome,
        &Time(now),
    );
    if pg.status.as_ref() == Some(&status) {
        return Ok(false);
    }
    let api: Api<PostgreSQL> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let patch = json!({
        "apiVersion": "tusk.dev/v1alpha1",
        "kind": "PostgreSQL",
        "status": status,
    });
    api.patch_status(
        cluster.name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| Error::Status {
        name: cluster.name.to_owned(),
        source,
    })?;
    Ok(true)
}

/// Makes a failed reconcile visible: a Warning Event and, when possible, a False Ready
/// condition carrying the reason. Best effort: the error itself is what gets retried.
async fn report_error(pg: &PostgreSQL, ctx: &Context, error: &Error) {
    publish(
        ctx,
        pg,
        EventType::Warning,
        error.reason(),
        "Reconcile",
        error.to_string(),
    )
    .await;
    let Ok(cluster) = Cluster::new(pg) else {
        return;
    };
    let outcome = Outcome::Failed {
        reason: error.reason(),
        message: error.to_string(),
    };
    if let Err(e) = update_status(pg, &cluster, &outcome, ctx).await {
        warn!(cluster = %cluster.name, error = %e, "could not record the failure in the status");
    }
}

pub(super) async fn publish(
    ctx: &Context,
    pg: &PostgreSQL,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    publish_related(ctx, pg, type_, reason, action, note, None).await;
}

/// Publishes an Event about `pg`; `related` names the child it concerns, which also keeps
/// Events about different children from being folded into one series.
async fn publish_related(
    ctx: &Context,
    pg: &PostgreSQL,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
    related: Option<ObjectReference>,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: related,
    };
    if let Err(e) = ctx.recorder.publish(&event, &pg.object_ref(&())).await {
        warn!(cluster = %pg.name_any(), error = %e, "could not publish an Event");
    }
}
