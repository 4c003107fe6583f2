//! The client Services' routing against a real API server and kube-controller-manager: the
//! operator's EndpointSlices name the primary's pod (`-rw`) and the serving instances (`-ro`,
//! `-r`), and Services of an earlier Tusk (routed by selectors, with kube-controller-manager's
//! slices) move over without leaving a slice behind.

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

/// Whether `slices` are the operator's only, naming exactly `ips` (no slice at all when there is
/// nothing to name: an empty one is never created).
fn only_ours(slices: &[(String, Vec<String>)], ips: &[String]) -> bool {
    let ours = slices.iter().all(|(by, _)| by == "operator.tusk.dev");
    let named: Vec<&String> = slices.iter().flat_map(|(_, a)| a).collect();
    ours && slices.len() <= 1
        && named.len() == ips.len()
        && ips.iter().all(|ip| named.contains(&ip))
}

#[scenario]
async fn client_services_are_routed_by_the_operators_slices_and_selectors_move_over(
    ctx: Ctx,
) -> Result {
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
    // One instance: `-rw` and `-r` name it, `-ro` nothing.
    let routed = [
        (format!("{name}-rw"), vec![ip.clone()], Some("primary")),
        (format!("{name}-ro"), vec![], Some("replica")),
        (format!("{name}-r"), vec![ip.clone()], None),
    ];
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    for (service, ips, _) in &routed {
        until(&format!("{service}'s slices"), ctx.timeout(), || async {
            let slices = slices_of(&ctx, service).await?;
            Ok(Check::when(only_ours(&slices, ips), format!("{slices:?}")))
        })
        .await?;
        let spec = services.get(service).await?.spec.unwrap_or_default();
        ensure!(
            spec.selector.is_none(),
            "{service} has a selector: {:?}",
            spec.selector
        );
        say(format!(
            "{service}: no selector, the operator's slice names {ips:?}"
        ));
    }

    // As an earlier Tusk applied them, under the operator's own field manager: selectors on the
    // cluster's (and the role's) labels, no annotation. kube-controller-manager then gives each
    // a slice. The operator is stopped meanwhile, as an upgrade finds them: running, a
    // reconcile with a cache a write behind re-applied one of them under the same manager
    // while it was being set up, leaving kube-controller-manager's slice with no move to clear
    // it (seen once in a local run).
    ctx.platform.operator_kill().await?;
    let params = PatchParams::apply("tusk-operator").force();
    for (service, _, role) in &routed {
        let current = services.get(service).await?;
        let spec = current.spec.clone().unwrap_or_default();
        let mut selector = json!({"tusk.dev/cluster": name});
        if let Some(role) = role {
            selector["tusk.dev/role"] = json!(role);
        }
        let earlier = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": ctx.ns, "labels": current.labels(),
                         "ownerReferences": current.owner_references()},
            "spec": {"type": "ClusterIP", "ports": spec.ports, "selector": selector},
        });
        services
            .patch(service, &params, &Patch::Apply(&earlier))
            .await?;
    }
    ctx.platform.operator_start(ctx.timeout()).await?;
    say(
        "-rw, -ro, -r put back as an earlier Tusk left them (selectors, no annotation), the operator started again",
    );
    for (service, ips, _) in &routed {
        until(
            &format!("{service}'s move to finish"),
            ctx.timeout(),
            || async {
                let current = services.get(service).await?;
                let annotated = current
                    .annotations()
                    .get("tusk.dev/endpoints")
                    .is_some_and(|v| v == "operator");
                let selector = current.spec.and_then(|s| s.selector);
                let slices = slices_of(&ctx, service).await?;
                Ok(Check::when(
                    annotated && selector.is_none() && only_ours(&slices, ips),
                    format!("annotated {annotated}, selector {selector:?}, slices {slices:?}"),
                ))
            },
        )
        .await?;
        say(format!(
            "{service} moved: selector removed, kube-controller-manager's slice deleted, annotated"
        ));
    }
    // A slice that controller re-created after the move had ended would stay for good.
    for (service, ips, _) in &routed {
        let slices = slices_of(&ctx, service).await?;
        ensure!(
            only_ours(&slices, ips),
            "{service}: a slice came back after the move: {slices:?}"
        );
        let current = services.get(service).await?;
        ensure!(
            !current.annotations().contains_key("tusk.dev/unselected-at"),
            "{service} still notes the move: {:?}",
            current.annotations()
        );
    }
    say("every move ended: only the operator's slices, no move noted");
    Ok(())
}

/// `spec.services.disabled` on a running cluster: `-ro` and `-r` and the operator's slice of
/// `-r` are deleted, `-rw` keeps routing; taken out of the list, both come back and `-r` is
/// routed again.
#[scenario]
async fn disabled_client_services_are_deleted_and_come_back(ctx: Ctx) -> Result {
    let name = "fewer";
    ctx.apply(&cluster(name, None)).await?;
    ctx.wait_ready(&[name]).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let pod = pods.get(&format!("{name}-0")).await?;
    let ip = pod.status.and_then(|s| s.pod_ip).unwrap_or_default();
    ensure!(!ip.is_empty(), "{name}-0 has no IP");
    let (rw, ro, any) = (
        format!("{name}-rw"),
        format!("{name}-ro"),
        format!("{name}-r"),
    );
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let routed_to = |service: String, ips: Vec<String>| {
        let ctx = &ctx;
        async move {
            until(&format!("{service}'s slice"), ctx.timeout(), || async {
                let slices = slices_of(ctx, &service).await?;
                Ok(Check::when(only_ours(&slices, &ips), format!("{slices:?}")))
            })
            .await
        }
    };
    routed_to(any.clone(), vec![ip.clone()]).await?;
    say(format!("{any} routed to {ip} before"));

    let disable = json!({"spec": {"services": {"disabled": ["ro", "r"]}}});
    ctx.merge_patch_postgresql_in(&ctx.ns, name, disable)
        .await?;
    for service in [&ro, &any] {
        until(&format!("{service} deleted"), ctx.timeout(), || async {
            let left = services.get_opt(service).await?.is_some();
            let slices = slices_of(&ctx, service).await?;
            Ok(Check::when(
                !left && slices.is_empty(),
                format!("Service left: {left}, slices {slices:?}"),
            ))
        })
        .await?;
    }
    ensure!(
        services.get_opt(&rw).await?.is_some(),
        "{rw} went with the others"
    );
    routed_to(rw.clone(), vec![ip.clone()]).await?;
    say(format!(
        "disabled: {ro} and {any} deleted with {any}'s slice, {rw} still routed to {ip}"
    ));

    let enable = json!({"spec": {"services": null}});
    ctx.merge_patch_postgresql_in(&ctx.ns, name, enable).await?;
    for service in [&ro, &any] {
        until(&format!("{service} back"), ctx.timeout(), || async {
            let back = services.get_opt(service).await?;
            Ok(Check::when(back.is_some(), "not yet"))
        })
        .await?;
    }
    // One instance: `-ro` routes nowhere (no slice), `-r` to the one pod.
    routed_to(ro.clone(), vec![]).await?;
    routed_to(any.clone(), vec![ip.clone()]).await?;
    say(format!(
        "enabled again: {ro} and {any} back, {any} routed to {ip}"
    ));
    Ok(())
}
