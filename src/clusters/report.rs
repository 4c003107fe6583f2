//! Making a cluster's reconcile visible, in one place: its status (computed by `status`,
//! written only when it changed) and every Event a reconcile publishes — of its writes, of what
//! it found (a restore's end, overdue backups, volumes that cannot grow, failovers and
//! switchovers, Ready turning on or off) and of its errors.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::events::Event;
use tracing::{info, warn};

use super::ha::{PrimaryState, SwitchoverNote};
use super::status::{self, BACKUP_OVERDUE, Outcome, RestoreProgress};
use super::storage::{EXPANSION_NOT_SUPPORTED, StorageProgress};
use crate::crd::PostgreSQL;
use crate::crd::conditions::{LAST_BACKUP_SUCCEEDED, RESTORED, STORAGE_RESIZED};
use crate::error::{Error, Result};
use crate::resources::Cluster;
use crate::runtime::apply::{Change, Written};
use crate::runtime::events::{self, about, normal, warning};
use crate::runtime::{Context, status::now};

/// Writes the status for `outcome` when it differs from the current one; returns whether it did.
pub async fn update_status(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    outcome: &Outcome,
    ctx: &Context,
) -> Result<bool> {
    let mut status = status::compute(
        pg.status.as_ref(),
        cluster,
        pg.metadata.generation,
        outcome,
        &now(),
    );
    status.certificates = super::credentials::certificate_times(cluster, ctx);
    let written =
        crate::runtime::status::write(&ctx.client, pg, pg.status.as_ref(), &status).await?;
    let Some(written) = written else {
        return Ok(false);
    };
    // The next reconcile may start before the watch brings this back (see `own_status`).
    ctx.own_status.wrote(pg, written);
    Ok(true)
}

/// Publishes `event` about `pg`.
pub async fn publish(ctx: &Context, pg: &PostgreSQL, event: Event) {
    events::publish(&ctx.recorder, pg, event).await;
}

/// A spec the operator cannot realise: `Ready=False` with reason `InvalidSpec`, and a Warning
/// the first time (when the status changed); what the primary step did is reported all the
/// same.
pub async fn invalid_spec(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    message: String,
    primary: Option<PrimaryState>,
    ctx: &Context,
) -> Result<()> {
    let outcome = Outcome::InvalidSpec {
        message: message.clone(),
        primary: primary.map(Box::new),
    };
    if update_status(pg, cluster, &outcome, ctx).await? {
        publish(ctx, pg, warning("InvalidSpec", "Validate", message)).await;
    }
    findings(pg, ctx, &outcome).await;
    Ok(())
}

/// The Events, metrics and log lines of a reconcile's `writes`, and of the verification it
/// asked for (`verification_asked`).
pub async fn writes(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    ctx: &Context,
    writes: &[Written],
    verification_asked: Option<&str>,
) {
    // A cluster's first reconcile creates what its user has just applied; its status and
    // `kubectl tusk status` say what exists. Announcing those children would be one more write
    // per new cluster (a thousand at once: 1,000 Events nobody asked for). A child created
    // later (re-created after a deletion, the CronJob once Ready) is announced.
    if pg.status.is_some() {
        for event in write_events(writes) {
            publish(ctx, pg, event).await;
        }
    }
    // A database that has served once was initialised with the old Secret's password.
    let served = pg.has_served();
    for write in writes {
        let (kind, name, action) = (write.kind(), write.name(), write.change.as_str());
        ctx.metrics.child_written(kind, &action.to_lowercase());
        info!(cluster = %cluster.name, namespace = %cluster.namespace, kind, name, action, "child written");
        let is_ca = name == cluster.ca_secret_name();
        if kind == "Secret" && is_ca && write.change == Change::Created && served {
            let note = format!(
                "Secret {name} was missing: a new certificate authority and server certificate \
                 were issued; clients that verify the server need the new ca.crt"
            );
            publish(
                ctx,
                pg,
                warning("CertificateAuthorityRecreated", "Created", note),
            )
            .await;
        } else if kind == "Secret"
            && write.change == Change::Created
            && served
            && !name.ends_with("-tls")
            // Made from the credentials, not a password of its own (an upgrade creates it).
            && name != cluster.verifiers_secret_name()
        {
            // The superuser's and the app's passwords are declared: the new one becomes the
            // role's. The others' roles keep theirs until a manager starts again.
            let declared =
                name == cluster.superuser_secret_name() || name == cluster.app_secret_name();
            let note = if declared {
                format!(
                    "Secret {name} was missing and has been re-created with a new password, \
                     which becomes the role's within a minute or two; the old one stops working"
                )
            } else {
                format!(
                    "Secret {name} was missing and has been re-created with a new password; the \
                     database still has the old one: restore the Secret or set the new password \
                     with ALTER ROLE"
                )
            };
            publish(ctx, pg, warning("SecretRecreated", "Created", note)).await;
        }
    }
    if let Some(note) = verification_asked {
        let event = normal("VerificationScheduled", "Verify", note.to_owned());
        publish(ctx, pg, event).await;
    }
}

/// The Events of what an applied reconcile found (`outcome`, whose status is written): each
/// published once, the status recording that it was.
pub async fn findings(pg: &PostgreSQL, ctx: &Context, outcome: &Outcome) {
    if let Outcome::InvalidSpec { primary, .. } = outcome {
        if let Some(primary) = primary {
            publish_primary(pg, ctx, primary).await;
        }
        return;
    }
    let Outcome::Applied {
        readiness,
        restore,
        backups,
        storage,
        primary,
        ..
    } = outcome
    else {
        return;
    };
    publish_restore(pg, ctx, restore).await;
    publish_overdue(pg, ctx, backups.overdue.as_deref()).await;
    publish_storage(pg, ctx, storage.as_ref()).await;
    publish_primary(pg, ctx, primary).await;
    let (was_ready, serving) = (pg.is_ready(), readiness.ready && restore.allows_ready());
    if serving && !was_ready {
        publish(ctx, pg, normal("Ready", "Reconcile", readiness.message())).await;
        if let (false, Some(created)) = (pg.has_served(), pg.meta().creation_timestamp.as_ref()) {
            let elapsed = Timestamp::now().duration_since(created.0);
            ctx.metrics
                .first_ready(Duration::try_from(elapsed).unwrap_or_default());
        }
    } else if !serving && was_ready {
        let note = readiness.message();
        publish(ctx, pg, warning("NotReady", "Reconcile", note)).await;
    }
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
async fn publish_overdue(pg: &PostgreSQL, ctx: &Context, overdue: Option<&str>) {
    let Some(message) = overdue else {
        return;
    };
    if !has_reason(pg, LAST_BACKUP_SUCCEEDED, BACKUP_OVERDUE) {
        publish(
            ctx,
            pg,
            warning(BACKUP_OVERDUE, "Backup", message.to_owned()),
        )
        .await;
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

/// A Warning for every failover, and one when a failover is due but cannot happen; Events for
/// each switchover's start and end and each restart of a rolling update.
async fn publish_primary(pg: &PostgreSQL, ctx: &Context, primary: &PrimaryState) {
    match &primary.failover {
        Some(switched) if switched.reason == "Switchover" => {
            ctx.metrics.switched_over();
            let note = format!(
                "switched over from {} to {} in {:.1}s, after {} had replayed the old primary's \
                 final WAL",
                switched.from,
                switched.to,
                switched.seconds.unwrap_or_default(),
                switched.to
            );
            publish(ctx, pg, normal("SwitchedOver", "Switchover", note)).await;
        }
        Some(failover) => {
            ctx.metrics
                .failed_over(failover.seconds.unwrap_or_default());
            let note = format!(
                "primary {} stopped renewing its Lease ({:.1}s); promoted {}, the most advanced replica",
                failover.from,
                failover.seconds.unwrap_or_default(),
                failover.to
            );
            publish(ctx, pg, warning("FailedOver", "Failover", note)).await;
        }
        None => {}
    }
    if let Some(note) = &primary.switchover {
        publish(ctx, pg, switchover_event(note)).await;
    }
    if let Some(pod) = &primary.restarted {
        let note = format!(
            "restarted replica {pod} on the StatefulSet's new revision (replicas first, one at a \
             time; the primary last, after a switchover)"
        );
        publish(ctx, pg, normal("RollingUpdate", "Restart", note)).await;
    }
    if let Some(lowered) = &primary.primary_first {
        let note = format!(
            "the update lowers {}: replicas restart once the primary runs the lower values \
             (its instance manager restarts it in place when the new configuration reaches it)",
            lowered.join(", ")
        );
        publish(ctx, pg, normal("RollingUpdate", "PrimaryFirst", note)).await;
    }
    if let Some(stuck) = &primary.stuck {
        let event = warning("FailoverBlocked", "Failover", stuck.clone());
        publish(ctx, pg, event).await;
    }
    if let Some(why) = &primary.release_requested {
        let event = warning("ReleaseRequested", "Failover", why.clone());
        publish(ctx, pg, event).await;
    }
}

fn switchover_event(note: &SwitchoverNote) -> Event {
    match note {
        SwitchoverNote::Started { from, to, why } => normal(
            "SwitchoverStarted",
            "Switchover",
            format!("asked {from} to shut down cleanly and hand the primary role to {to} ({why})"),
        ),
        SwitchoverNote::Blocked(why) => warning("SwitchoverBlocked", "Switchover", why.clone()),
        SwitchoverNote::Rejected(why) => warning("SwitchoverRejected", "Switchover", why.clone()),
        SwitchoverNote::Aborted(why) => warning(
            "SwitchoverAborted",
            "Switchover",
            format!("{why}; the old primary keeps its role"),
        ),
    }
}

/// Kubernetes refuses an Event note longer than this many bytes.
const NOTE_LIMIT: usize = 1024;

/// The Events for a reconcile's `writes`: one per kind of change (Created, Updated, Deleted)
/// listing its objects, so that creating a cluster makes one Event instead of one per child (a
/// thousand new clusters: 1,000 Event writes, not 6,000). A change to a single object names it
/// as the Event's related object.
pub fn write_events(writes: &[Written]) -> Vec<Event> {
    let mut changes: Vec<&str> = writes.iter().map(|w| w.change.as_str()).collect();
    changes.sort_unstable();
    changes.dedup();
    changes
        .into_iter()
        .map(|change| {
            let objects: Vec<&Written> = writes
                .iter()
                .filter(|w| w.change.as_str() == change)
                .collect();
            let listed: Vec<String> = objects
                .iter()
                .map(|w| format!("{} {}", w.kind(), w.name()))
                .collect();
            let event = normal(
                change,
                change,
                bounded(format!("{change} {}", listed.join(", "))),
            );
            match objects.as_slice() {
                [only] => about(event, only.reference.clone()),
                _ => event,
            }
        })
        .collect()
}

/// `note` cut to the Event limit at a character boundary.
fn bounded(mut note: String) -> String {
    if note.len() > NOTE_LIMIT {
        let mut end = NOTE_LIMIT - '…'.len_utf8();
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push('…');
    }
    note
}

/// Makes a failed reconcile visible: a Warning Event and, when possible, a False Ready
/// condition carrying the reason. Best effort: the error itself is what gets retried.
pub async fn report_error(pg: &PostgreSQL, ctx: &Context, error: &Error) {
    let event = warning(error.reason(), "Reconcile", error.to_string());
    publish(ctx, pg, event).await;
    // Being deleted: the finalizer's step has already written its `Cleanup` condition, and
    // `pg` is the copy from before it, so a status written from it would drop that condition.
    if pg.meta().deletion_timestamp.is_some() {
        return;
    }
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::ObjectMeta;

    use super::*;

    fn written<K: kube::Resource<DynamicType = ()> + Default>(
        name: &str,
        change: Change,
    ) -> Written {
        let mut object = K::default();
        *object.meta_mut() = ObjectMeta {
            name: Some(name.into()),
            namespace: Some("prod".into()),
            ..ObjectMeta::default()
        };
        Written::of(&object, change).expect("a change")
    }

    /// The cluster's app Secret and its ConfigMap, the two children these tests write.
    fn secret(change: Change) -> Written {
        written::<Secret>("demo-app", change)
    }

    fn config_map(change: Change) -> Written {
        written::<ConfigMap>("demo-config", change)
    }

    #[test]
    fn a_new_cluster_gets_one_event_listing_its_children() {
        let events = write_events(&[secret(Change::Created), config_map(Change::Created)]);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, "Created");
        assert_eq!(
            events[0].note.as_deref(),
            Some("Created Secret demo-app, ConfigMap demo-config")
        );
        assert_eq!(
            events[0].secondary, None,
            "several objects: none is the related one"
        );
    }

    #[test]
    fn one_changed_object_is_the_events_related_object_and_changes_are_not_mixed() {
        let events = write_events(&[config_map(Change::Updated), secret(Change::Created)]);
        let notes: Vec<_> = events.iter().filter_map(|e| e.note.as_deref()).collect();
        assert_eq!(
            notes,
            ["Created Secret demo-app", "Updated ConfigMap demo-config"]
        );
        let related = events[0].secondary.as_ref().and_then(|r| r.name.as_deref());
        assert_eq!(related, Some("demo-app"));
        assert!(write_events(&[]).is_empty());
    }

    #[test]
    fn a_long_list_is_cut_to_the_event_limit() {
        let note = bounded(format!("Created {}", "é".repeat(2000)));
        assert!(
            note.len() <= NOTE_LIMIT && note.ends_with('…'),
            "{}",
            note.len()
        );
    }
}
