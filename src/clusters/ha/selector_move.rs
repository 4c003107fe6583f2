//! The move of a client Service of an earlier Tusk (routed by a selector, with
//! kube-controller-manager's Endpoints and slices) to the operator's EndpointSlice, and of one
//! given a selector by hand. Once in a cluster's life, in three kinds of pass:
//!
//! 1. The selector goes, whoever set it (a merge patch: the map is atomic, and a selector another
//!    manager set is not removed by an apply that leaves it out), and the time it went is noted
//!    on the Service (`tusk.dev/unselected-at`).
//! 2. For [`SETTLE`] after that, every pass deletes what kube-controller-manager kept: its
//!    Endpoints (which the mirroring controller would copy into a slice naming a primary of the
//!    past) and its slices. Not once: a sync that controller began while its cache still showed
//!    the selector re-creates a slice after the operator's delete (seen in CI), and it never
//!    deletes a slice of a Service without a selector itself.
//! 3. After [`SETTLE`], a last delete, then the annotation that ends the move
//!    (`tusk.dev/endpoints: operator`). An interrupted move is taken up where it was.
//!
//! A new cluster's Service is created without a selector: nothing to move.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::error::Result;
use crate::resources::endpoints::{MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL};
use crate::resources::{Cluster, ROUTED_BY_OPERATOR, ROUTING_ANNOTATION, client_service_names};
use crate::runtime::Context;
use crate::runtime::apply::{delete, merge_patch};

/// When the selector went, while a move is under way.
pub const UNSELECTED_AT_ANNOTATION: &str = "tusk.dev/unselected-at";

/// How long after the selector went kube-controller-manager may still act on it: a sync it
/// began with the selector in its cache ends within this, even on a loaded control plane.
pub const SETTLE: Duration = Duration::from_secs(10);

/// One pass of the move, decided from the cached Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveStep {
    /// Moved, no selector: nothing to do.
    Done,
    /// A selector: remove it, note the time.
    Unselect,
    /// Delete what kube-controller-manager kept; then look again after the duration, or
    /// (`None`) end the move.
    Clear { again_in: Option<Duration> },
    /// No time noted (an interrupted move of an earlier release): delete, note the time now.
    ClearAndNote,
}

/// The pass the cached Service `service` needs at `now`.
pub fn step(service: &Value, now: Timestamp) -> MoveStep {
    if has_selector(service) {
        return MoveStep::Unselect;
    }
    if moved(service) {
        return MoveStep::Done;
    }
    let noted = service["metadata"]["annotations"][UNSELECTED_AT_ANNOTATION]
        .as_str()
        .and_then(|at| at.parse::<Timestamp>().ok());
    let Some(noted) = noted else {
        return MoveStep::ClearAndNote;
    };
    // A clock behind the note counts as no time waited.
    let waited = Duration::try_from(now.duration_since(noted)).unwrap_or_default();
    let left = SETTLE.checked_sub(waited).filter(|left| !left.is_zero());
    MoveStep::Clear { again_in: left }
}

/// Whether the client Service `name` is mid-move (or has a selector): the children's apply
/// leaves it to the move until it has ended.
pub fn moving(ctx: &Context, cluster: &Cluster<'_>, name: &str) -> bool {
    let cached = ctx.caches.services.get(cluster.namespace, name);
    cached.is_some_and(|service| !moved(&service) || has_selector(&service))
}

fn moved(service: &Value) -> bool {
    let annotation = &service["metadata"]["annotations"][ROUTING_ANNOTATION];
    annotation.as_str() == Some(ROUTED_BY_OPERATOR)
}

fn has_selector(service: &Value) -> bool {
    let selector = service["spec"]["selector"].as_object();
    selector.is_some_and(|selector| !selector.is_empty())
}

/// One pass of the move of each client Service; how soon a move wants the next.
pub async fn move_services(ctx: &Context, cluster: &Cluster<'_>) -> Result<Option<Duration>> {
    let mut again = None;
    // One after the other: a move happens once in a cluster's life. A Service `spec.services`
    // disables is deleted instead (`children`).
    for name in client_service_names(cluster) {
        let soon = move_service(ctx, cluster, &name).await?;
        again = again.into_iter().chain(soon).min();
    }
    Ok(again)
}

async fn move_service(
    ctx: &Context,
    cluster: &Cluster<'_>,
    name: &str,
) -> Result<Option<Duration>> {
    let ns = cluster.namespace;
    let Some(cached) = ctx.caches.services.get(ns, name) else {
        return Ok(None);
    };
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
    let now = Timestamp::now();
    let annotate = |endpoints: Value, at: Value| {
        json!({"metadata": {"annotations": {
            ROUTING_ANNOTATION: endpoints, UNSELECTED_AT_ANNOTATION: at}}})
    };
    match step(&cached, now) {
        MoveStep::Done => Ok(None),
        MoveStep::Unselect => {
            let mut unselect = annotate(Value::Null, json!(now.to_string()));
            unselect["spec"] = json!({"selector": null});
            merge_patch(&services, name, &unselect).await?;
            // Woken by the write's watch event; the settle is timed from here.
            Ok(Some(SETTLE))
        }
        MoveStep::ClearAndNote => {
            clear(ctx, ns, name).await?;
            merge_patch(
                &services,
                name,
                &annotate(Value::Null, json!(now.to_string())),
            )
            .await?;
            Ok(Some(SETTLE))
        }
        MoveStep::Clear {
            again_in: Some(left),
        } => {
            clear(ctx, ns, name).await?;
            Ok(Some(left))
        }
        MoveStep::Clear { again_in: None } => {
            clear(ctx, ns, name).await?;
            let done = annotate(json!(ROUTED_BY_OPERATOR), Value::Null);
            merge_patch(&services, name, &done).await?;
            tracing::info!(
                cluster = cluster.name,
                service = name,
                "now routed by the operator's EndpointSlice"
            );
            Ok(None)
        }
    }
}

/// Deletes kube-controller-manager's Endpoints and slices of Service `name`.
async fn clear(ctx: &Context, ns: &str, name: &str) -> Result<()> {
    delete(&Api::<Endpoints>::namespaced(ctx.client.clone(), ns), name).await?;
    let foreign = ListParams::default().labels(&format!(
        "{SERVICE_NAME_LABEL}={name},{MANAGED_BY_LABEL}!={MANAGED_BY}"
    ));
    let what = format!("{name}'s (kube-controller-manager's)");
    super::routing::delete_slices(ctx, ns, &foreign, &what).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(selector: Option<Value>, annotations: Value) -> Value {
        json!({"metadata": {"annotations": annotations}, "spec": {"selector": selector}})
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_selector_goes_first_moved_or_not() {
        let selected = Some(json!({"tusk.dev/cluster": "demo"}));
        assert_eq!(
            step(&service(selected.clone(), json!({})), at(0)),
            MoveStep::Unselect
        );
        let moved = json!({ROUTING_ANNOTATION: ROUTED_BY_OPERATOR});
        assert_eq!(
            step(&service(selected, moved.clone()), at(0)),
            MoveStep::Unselect
        );
        assert_eq!(step(&service(None, moved), at(0)), MoveStep::Done);
        assert_eq!(
            step(&service(Some(json!({})), json!({})), at(0)),
            MoveStep::ClearAndNote
        );
    }

    #[test]
    fn kube_controller_managers_objects_are_cleared_until_the_settle_has_passed() {
        let noted = service(None, json!({UNSELECTED_AT_ANNOTATION: at(0).to_string()}));
        assert_eq!(
            step(&noted, at(3)),
            MoveStep::Clear {
                again_in: Some(Duration::from_secs(7))
            }
        );
        // A clock behind the note waits the whole settle.
        assert_eq!(
            step(&noted, at(-5)),
            MoveStep::Clear {
                again_in: Some(SETTLE)
            }
        );
        assert_eq!(step(&noted, at(10)), MoveStep::Clear { again_in: None });
        assert_eq!(step(&noted, at(600)), MoveStep::Clear { again_in: None });
    }

    #[test]
    fn a_move_without_a_noted_time_notes_one() {
        let unnoted = service(None, json!({UNSELECTED_AT_ANNOTATION: "yesterday"}));
        assert_eq!(step(&unnoted, at(0)), MoveStep::ClearAndNote);
        assert_eq!(
            step(&service(None, json!(null)), at(0)),
            MoveStep::ClearAndNote
        );
    }
}
