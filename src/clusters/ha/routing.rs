//! `-rw`'s routing: the operator writes its EndpointSlice from the Lease's holder
//! (`resources::rw_endpoints`), so clients follow a handover in one write of the reconcile that
//! made it. A selector left to kube-controller-manager followed the role label ~15 s late while
//! that controller served a burst of new Services (docs/src/performance/failover.md).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::Value;

use super::pods::is_ready;
use crate::error::{Error, Result};
use crate::resources::rw_endpoints::{
    MANAGED_BY, MANAGED_BY_LABEL, Primary, SERVICE_NAME_LABEL, rw_endpoints,
};
use crate::resources::{Cluster, RW_ROUTING_ANNOTATION, RW_ROUTING_BY_OPERATOR, rw_service};
use crate::runtime::Context;
use crate::runtime::apply::{Change, apply_json, delete, merge_patch};

/// Routes `-rw` to `holder`'s pod while it is Ready, or to nothing (no holder, not Ready, or
/// `clients` false while a restore holds applications back). A pod not Ready is left out rather
/// than listed not ready: kube-proxy routes to neither, and a new cluster's slice is then
/// written once, when its primary first serves (no slice is created empty). Sent only when the
/// cached slice differs, or always with `force` (this reconcile wrote it already, so the cache
/// is behind); returns whether it was sent.
pub async fn route(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[Arc<Pod>],
    holder: Option<&str>,
    clients: bool,
    force: bool,
) -> Result<bool> {
    let pod = holder.and_then(|holder| pods.iter().find(|pod| pod.name_any() == holder));
    let primary = pod.and_then(|pod| {
        Some(Primary {
            pod: pod.metadata.name.as_deref()?,
            ip: pod.status.as_ref()?.pod_ip.as_deref()?,
        })
        .filter(|_| is_ready(pod))
    });
    let mut slice = rw_endpoints(cluster, primary, clients);
    let ns = cluster.namespace;
    let known = ctx
        .caches
        .endpoint_slices
        .get(ns, &cluster.rw_service_name());
    let nowhere = slice.endpoints.as_ref().is_none_or(Vec::is_empty);
    if let Some(family) = known.as_ref().and_then(|k| k["addressType"].as_str())
        && nowhere
    {
        // `addressType` cannot change: an emptied slice keeps the family it was written with.
        family.clone_into(&mut slice.address_type);
    }
    let cached = known.filter(|_| !force);
    let change = match (&cached, nowhere, force) {
        // No slice routes nowhere already: nothing to create yet.
        (None, true, false) => Change::Unchanged,
        _ => {
            let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), ns);
            apply_json(&api, cached, &slice).await?
        }
    };
    move_from_selector(ctx, cluster).await?;
    Ok(change != Change::Unchanged)
}

/// Whether `-rw`'s Service is an earlier Tusk's, routed by a selector, and not yet moved to the
/// operator's slice: the children's apply leaves it to [`route`] until the move has finished.
pub fn moving(ctx: &Context, cluster: &Cluster<'_>) -> bool {
    let cached = ctx
        .caches
        .services
        .get(cluster.namespace, &cluster.rw_service_name());
    cached.is_some_and(|service| !moved(&service) || has_selector(&service))
}

fn moved(service: &Value) -> bool {
    let annotation = &service["metadata"]["annotations"][RW_ROUTING_ANNOTATION];
    annotation.as_str() == Some(RW_ROUTING_BY_OPERATOR)
}

fn has_selector(service: &Value) -> bool {
    let selector = service["spec"]["selector"].as_object();
    selector.is_some_and(|selector| !selector.is_empty())
}

/// A `-rw` Service of an earlier Tusk selects the primary by label, and a selector added by hand
/// would route to whatever it selects. In one reconcile the selector goes, whoever set it (a
/// merge patch: the map is atomic, and a selector another manager set is not removed by an
/// apply that leaves it out), and the annotation with it. In a later one — woken by that write's watch
/// event, once the cache shows no selector, as kube-controller-manager's informers then very
/// likely do too (deleting its slices while it still saw a selector would have them re-created)
/// — what that controller kept goes: its Endpoints, which the mirroring controller would
/// otherwise copy into a slice naming a primary of the past, and its slices. Only then does the
/// Service get its annotation, so an interrupted move is taken up again. A new cluster's
/// Service is created without a selector: nothing to move.
async fn move_from_selector(ctx: &Context, cluster: &Cluster<'_>) -> Result<()> {
    let (ns, name) = (cluster.namespace, cluster.rw_service_name());
    let Some(cached) = ctx.caches.services.get(ns, &name) else {
        return Ok(());
    };
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
    if has_selector(&cached) {
        let unselect = serde_json::json!({
            "metadata": {"annotations": {RW_ROUTING_ANNOTATION: null}},
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
    apply_json(&services, None, &rw_service(cluster)).await?;
    tracing::info!(
        cluster = cluster.name,
        "-rw is now routed by the operator's EndpointSlice"
    );
    Ok(())
}
