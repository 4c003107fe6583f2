//! Client routing: the operator writes the EndpointSlices of `-rw` (from the Lease's holder),
//! `-ro` and `-r` (from the instances' readiness) — `resources::endpoints` — so clients follow a
//! handover in one write of the reconcile that made it, and only the pods the operator chooses
//! serve (a Service of an earlier Tusk moves over: `selector_move`). Selectors left to
//! kube-controller-manager followed the role label ~15 s late while that controller served a
//! burst of new Services (docs/src/performance/failover.md).

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};

use super::pods::DatabasePod;
use crate::crd::ClientService;
use crate::error::{Error, Result};
use crate::resources::endpoints::{
    Instance, MANAGED_BY, MANAGED_BY_LABEL, Routes, client_slices, routes,
};
use crate::resources::{Cluster, has_client_service};
use crate::runtime::Context;
use crate::runtime::apply::{Change, apply_json};

/// Routes `-rw` to `holder`'s pod while it is Ready, or to nothing (no holder, not Ready, or
/// `clients` false while a restore holds applications back). A new cluster's slice is written
/// once, when its primary first serves (no slice is created empty). Sent only when the cached
/// slice differs, or always with `force` (this reconcile wrote it already, so the cache is
/// behind); returns whether it was sent.
pub async fn route(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[DatabasePod],
    holder: Option<&str>,
    clients: bool,
    force: bool,
) -> Result<bool> {
    let [rw, _, _] = slices(cluster, pods, holder, clients);
    let change = send(ctx, cluster, rw, force).await?;
    Ok(change != Change::Unchanged)
}

/// Routes `-ro` to the Ready instances other than `holder`, and `-r` to every Ready instance
/// (neither while `clients` is false); the slice of one `spec.services` disables is deleted.
/// After `-rw`: a failover is not held up by them.
pub async fn route_readers(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[DatabasePod],
    holder: Option<&str>,
    clients: bool,
) -> Result<()> {
    let [_, ro, any] = slices(cluster, pods, holder, clients);
    let readers = [(ClientService::ReadOnly, ro), (ClientService::Any, any)];
    let sent = readers.map(|(service, slice)| async move {
        if has_client_service(cluster, service) {
            send(ctx, cluster, slice, false).await.map(drop)
        } else {
            retire(ctx, cluster, &slice.name_any()).await
        }
    });
    futures::future::try_join_all(sent).await?;
    Ok(())
}

/// Deletes the operator's slice `name` of a Service `spec.services` disables, if there is one
/// (by name and the operator's label: the operator deletes slices only in collections, and
/// only its own).
async fn retire(ctx: &Context, cluster: &Cluster<'_>, name: &str) -> Result<()> {
    let ns = cluster.namespace;
    if ctx.caches.endpoint_slices.get(ns, name).is_none() {
        return Ok(());
    }
    let ours = ListParams::default()
        .fields(&format!("metadata.name={name}"))
        .labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    delete_slices(ctx, ns, &ours, name).await
}

/// Deletes the EndpointSlices of `ns` that `which` selects (`what` names them in an error): the
/// operator may delete slices only as a collection, by selectors.
pub async fn delete_slices(ctx: &Context, ns: &str, which: &ListParams, what: &str) -> Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), ns);
    match slices
        .delete_collection(&DeleteParams::background(), which)
        .await
    {
        Ok(_) => Ok(()),
        Err(source) => Err(Error::Delete {
            kind: "EndpointSlice".to_owned(),
            name: what.to_owned(),
            source,
        }),
    }
}

/// The client slices of `pods` (in the order given) with `holder` holding the Lease.
fn slices(
    cluster: &Cluster,
    pods: &[DatabasePod],
    holder: Option<&str>,
    clients: bool,
) -> [EndpointSlice; 3] {
    let instances: Vec<Instance> = pods
        .iter()
        .map(|pod| Instance {
            pod: &pod.name,
            ip: pod.ip.as_deref(),
            ready: pod.ready,
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
