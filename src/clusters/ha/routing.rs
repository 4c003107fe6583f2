//! Client routing: the operator writes the EndpointSlices of `-rw` (from the Lease's holder),
//! `-ro` and `-r` (from the instances' readiness) — `resources::endpoints` — so clients follow a
//! handover in one write of the reconcile that made it, and only the pods the operator chooses
//! serve. Selectors left to kube-controller-manager followed the role label ~15 s late while
//! that controller served a burst of new Services (docs/src/performance/failover.md).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::Value;

use super::pods::is_ready;
use crate::error::{Error, Result};
use crate::resources::endpoints::{
    Instance, MANAGED_BY, MANAGED_BY_LABEL, Routes, SERVICE_NAME_LABEL, client_slices, routes,
};
use crate::resources::{
    Cluster, ROUTED_BY_OPERATOR, ROUTING_ANNOTATION, any_service, ro_service, rw_service,
};
use crate::runtime::Context;
use crate::runtime::apply::{Change, apply_json, delete, merge_patch};

/// Routes `-rw` to `holder`'s pod while it is Ready, or to nothing (no holder, not Ready, or
/// `clients` false while a restore holds applications back). A new cluster's slice is written
/// once, when its primary first serves (no slice is created empty). Sent only when the cached
/// slice differs, or always with `force` (this reconcile wrote it already, so the cache is
/// behind); returns whether it was sent.
pub async fn route(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[Arc<Pod>],
    holder: Option<&str>,
    clients: bool,
    force: bool,
) -> Result<bool> {
    let [rw, _, _] = slices(cluster, pods, holder, clients);
    let change = send(ctx, cluster, rw, force).await?;
    move_from_selector(ctx, cluster, rw_service(cluster)).await?;
    Ok(change != Change::Unchanged)
}

/// Routes `-ro` to the Ready instances other than `holder`, and `-r` to every Ready instance
/// (neither while `clients` is false). After `-rw`: a failover is not held up by them.
pub async fn route_readers(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[Arc<Pod>],
    holder: Option<&str>,
    clients: bool,
) -> Result<()> {
    let [_, ro, any] = slices(cluster, pods, holder, clients);
    futures::try_join!(
        send(ctx, cluster, ro, false),
        send(ctx, cluster, any, false)
    )?;
    // One after the other: a move happens once in a cluster's life.
    move_from_selector(ctx, cluster, ro_service(cluster)).await?;
    move_from_selector(ctx, cluster, any_service(cluster)).await
}

/// The client slices of `pods` (in the order given) with `holder` holding the Lease.
fn slices(
    cluster: &Cluster,
    pods: &[Arc<Pod>],
    holder: Option<&str>,
    clients: bool,
) -> [EndpointSlice; 3] {
    let instances: Vec<Instance> = pods
        .iter()
        .filter_map(|pod| {
            Some(Instance {
                pod: pod.metadata.name.as_deref()?,
                ip: pod.status.as_ref()?.pod_ip.as_deref(),
                ready: is_ready(pod),
            })
        })
        .collect();
    let routes: Routes = routes(&instances, holder, clients);
    client_slices(cluster, &routes)
}

/// Applies `slice` unless the cached one is the same (always with `force`). A slice that routes
/// nowhere is not created: no slice routes nowhere already.
async fn send(
    ctx: &Context,
    cluster: &Cluster<'_>,
    mut slice: EndpointSlice,
    force: bool,
) -> Result<Change> {
    let ns = cluster.namespace;
    let known = ctx.caches.endpoint_slices.get(ns, &slice.name_any());
    let nowhere = slice.endpoints.as_ref().is_none_or(Vec::is_empty);
    if let Some(family) = known.as_ref().and_then(|k| k["addressType"].as_str())
        && nowhere
    {
        // `addressType` cannot change: an emptied slice keeps the family it was written with.
        family.clone_into(&mut slice.address_type);
    }
    let cached = known.filter(|_| !force);
    match (&cached, nowhere, force) {
        (None, true, false) => Ok(Change::Unchanged),
        _ => {
            let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), ns);
            apply_json(&api, cached, &slice).await
        }
    }
}

/// Whether the client Service `name` is an earlier Tusk's, routed by a selector, and not yet
/// moved to the operator's slice: the children's apply leaves it to the routing step until the
/// move has finished.
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

/// A client Service of an earlier Tusk selects its pods by label, and a selector added by hand
/// would route to whatever it selects. In one reconcile the selector goes, whoever set it (a
/// merge patch: the map is atomic, and a selector another manager set is not removed by an
/// apply that leaves it out), and the annotation with it. In a later one — woken by that write's watch
/// event, once the cache shows no selector, as kube-controller-manager's informers then very
/// likely do too (deleting its slices while it still saw a selector would have them re-created)
/// — what that controller kept goes: its Endpoints, which the mirroring controller would
/// otherwise copy into a slice naming a primary of the past, and its slices. Only then does the
/// Service get its annotation, so an interrupted move is taken up again. A new cluster's
/// Service is created without a selector: nothing to move.
async fn move_from_selector(ctx: &Context, cluster: &Cluster<'_>, desired: Service) -> Result<()> {
    let (ns, name) = (cluster.namespace, desired.name_any());
    let Some(cached) = ctx.caches.services.get(ns, &name) else {
        return Ok(());
    };
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
    if has_selector(&cached) {
        let unselect = serde_json::json!({
            "metadata": {"annotations": {ROUTING_ANNOTATION: null}},
            "spec": {"selector": null},
        });
        merge_patch(&services, &name, &unselect).await?;
        return Ok(());
    }
    if moved(&cached) {
        return Ok(());
    }
    delete(&Api::<Endpoints>::namespaced(ctx.client.clone(), ns), &name).await?;
    let foreign = ListParams::default().labels(&format!(
        "{SERVICE_NAME_LABEL}={name},{MANAGED_BY_LABEL}!={MANAGED_BY}"
    ));
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), ns);
    if let Err(source) = slices
        .delete_collection(&DeleteParams::background(), &foreign)
        .await
    {
        return Err(Error::Delete {
            kind: "EndpointSlice".to_owned(),
            name: format!("{name}'s (kube-controller-manager's)"),
            source,
        });
    }
    // Sent whole: the cached copy (with its selector) is not what the server holds now.
    apply_json(&services, None, &desired).await?;
    tracing::info!(
        cluster = cluster.name,
        service = name,
        "now routed by the operator's EndpointSlice"
    );
    Ok(())
}
