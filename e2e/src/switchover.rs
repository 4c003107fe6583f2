//! Switchover as users request it: the `tusk.dev/switchover-to` annotation on the PostgreSQL,
//! and the wait until the operator has carried it out.

use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use tusk::crd::Failover;

use crate::{Check, Ctx, Result, until};

/// The annotation naming the instance to switch over to.
pub use tusk::resources::SWITCHOVER_ANNOTATION;

/// Asks the operator to make `target` the primary of `cluster`.
pub async fn request_switchover(ctx: &Ctx, cluster: &str, target: &str) -> Result {
    let patch = serde_json::json!({"metadata": {"annotations": {SWITCHOVER_ANNOTATION: target}}});
    ctx.postgresqls_in(&ctx.ns)
        .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Waits until `target` is `cluster`'s primary and the request is gone; the status' record of
/// the switchover.
pub async fn switched_over(ctx: &Ctx, cluster: &str, target: &str) -> Result<Failover> {
    until(
        format!("{cluster} switched over to {target}"),
        ctx.timeout(),
        || async {
            let pg = ctx.postgresql_in(&ctx.ns, cluster).await?;
            let requested = pg.annotations().get(SWITCHOVER_ANNOTATION).cloned();
            let status = pg.status.unwrap_or_default();
            let record = status.last_failover.filter(|f| f.to == target);
            Ok(match (requested, status.current_primary, record) {
                (None, Some(primary), Some(record)) if primary == target => Check::Done(record),
                (requested, primary, _) => Check::Pending(format!(
                    "primary {primary:?}, target {:?}, request {requested:?}",
                    status.target_primary
                )),
            })
        },
    )
    .await
}

/// Waits until pod `pod` has an Event with `reason` (the instance manager reports promotions,
/// demotions, rewinds …); its note.
pub async fn pod_event(ctx: &Ctx, pod: &str, reason: &str) -> Result<String> {
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let fields = format!("involvedObject.name={pod},reason={reason}");
    until(
        format!("a {reason} Event about {pod}"),
        ctx.timeout(),
        || async {
            let found = events.list(&ListParams::default().fields(&fields)).await?;
            Ok(match found.items.first() {
                Some(event) => Check::Done(event.message.clone().unwrap_or_default()),
                None => Check::Pending("none yet".to_owned()),
            })
        },
    )
    .await
}
