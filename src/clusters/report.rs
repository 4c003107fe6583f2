//! Making a cluster's reconcile visible: its status (computed by `status`, written only when it
//! changed) and its Events.

use kube::Resource;
use kube::runtime::events::Event;
use tracing::warn;

use super::children::Written;
use super::status::{self, Outcome};
use crate::crd::PostgreSQL;
use crate::error::{Error, Result};
use crate::resources::Cluster;
use crate::runtime::events::{self, about, normal, warning};
use crate::runtime::{Context, status::now};

/// Writes the status for `outcome` when it differs from the current one; returns whether it did.
pub async fn update_status(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    outcome: &Outcome,
    ctx: &Context,
) -> Result<bool> {
    let status = status::compute(
        pg.status.as_ref(),
        cluster,
        pg.metadata.generation,
        outcome,
        &now(),
    );
    crate::runtime::status::write(&ctx.client, pg, pg.status.as_ref(), &status).await
}

/// Publishes `event` about `pg`.
pub async fn publish(ctx: &Context, pg: &PostgreSQL, event: Event) {
    events::publish(&ctx.recorder, pg, event).await;
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
    use crate::runtime::apply::Change;

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
