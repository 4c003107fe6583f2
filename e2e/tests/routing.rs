//! `-rw`'s routing against a real API server and kube-controller-manager: the operator's
//! EndpointSlice names the primary's pod, and a `-rw` Service of an earlier Tusk (routed by a
//! selector, with kube-controller-manager's slice) moves over without leaving a slice behind.

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tusk_e2e::manifests::cluster;
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";

/// Every EndpointSlice of Service `service`, as (managed-by, addresses, target pods).
async fn slices_of(ctx: &Ctx, service: &str) -> Result<Vec<(String, Vec<String>)>> {
    let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let listed = api
        .list(&ListParams::default().labels(&format!("{SERVICE_NAME}={service}")))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .map(|slice| {
            let by = slice.labels().get(MANAGED_BY).cloned().unwrap_or_default();
            let addresses = slice
                .endpoints
                .unwrap_or_default()
                .into_iter()
                .flat_map(|e| e.addresses)
                .collect();
            (by, addresses)
        })
        .collect())
}

#[scenario]
async fn rw_is_routed_by_the_operators_slice_and_a_selector_moves_over(ctx: Ctx) -> Result {
    let name = "routed";
    ctx.apply(&cluster(name, None)).await?;
    ctx.wait_ready(&[name]).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let ip = pods
        .get(&format!("{name}-0"))
        .await?
        .status
        .and_then(|s| s.pod_ip)
        .unwrap_or_default();
    ensure!(!ip.is_empty(), "{name}-0 has no IP");
    let rw = format!("{name}-rw");
    let only_ours = |slices: &[(String, Vec<String>)]| {
        slices.len() == 1 && slices[0].0 == "operator.tusk.dev" && slices[0].1 == [ip.clone()]
    };
    until("-rw's slice to name the primary", ctx.timeout(), || async {
        let slices = slices_of(&ctx, &rw).await?;
        Ok(Check::when(only_ours(&slices), format!("{slices:?}")))
    })
    .await?;
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let service = services.get(&rw).await?;
    let spec = service.spec.clone().unwrap_or_default();
    ensure!(
        spec.selector.is_none(),
        "-rw has a selector: {:?}",
        spec.selector
    );
    say(format!(
        "{rw}: no selector, one slice (the operator's) naming {ip}"
    ));

    // As an earlier Tusk applied it, under the operator's own field manager: a selector on the
    // primary's label and no annotation. kube-controller-manager then gives it a slice.
    let earlier = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": rw, "namespace": ctx.ns, "labels": service.labels(),
                     "ownerReferences": service.owner_references()},
        "spec": {"type": "ClusterIP", "ports": spec.ports,
                 "selector": {"tusk.dev/cluster": name, "tusk.dev/role": "primary"}},
    });
    let params = PatchParams::apply("tusk-operator").force();
    services
        .patch(&rw, &params, &Patch::Apply(&earlier))
        .await?;
    say(format!(
        "{rw} put back as an earlier Tusk left it (selector, no annotation)"
    ));
    until("the move to finish", ctx.timeout(), || async {
        let service = services.get(&rw).await?;
        let annotated = service
            .annotations()
            .get("tusk.dev/endpoints")
            .is_some_and(|v| v == "operator");
        let selector = service.spec.and_then(|s| s.selector);
        let slices = slices_of(&ctx, &rw).await?;
        Ok(Check::when(
            annotated && selector.is_none() && only_ours(&slices),
            format!("annotated {annotated}, selector {selector:?}, slices {slices:?}"),
        ))
    })
    .await?;
    say(format!(
        "{rw} moved: selector removed, kube-controller-manager's slice deleted, annotated"
    ));
    Ok(())
}
