//! The database pods as the primary step sees them (from the watch cache), and their role
//! label: the only thing the operator writes on a pod.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

use crate::crd::MAX_INSTANCES;
use crate::error::Result;
use crate::resources::{CLUSTER_LABEL, Cluster, ROLE_LABEL, STATUS_TLS_LABEL, tls};
use crate::runtime::apply::{FIELD_MANAGER, unless_gone};
use crate::runtime::instances::{InstanceAddress, InstanceStatus};
use crate::runtime::{Context, cached};

/// The cached database pods of `cluster`, by name.
///
/// Looked up by name, not found by scanning the cache: a StatefulSet's pods are
/// `<statefulset>-<ordinal>`, and no ordinal reaches [`MAX_INSTANCES`] (the CRD bounds
/// `instances`, and the primary's pod is kept only below it). A scan cost every reconcile a pass
/// over every pod of the fleet: at 1,000 clusters, 5 % of the operator's CPU while a burst
/// converged, growing with the fleet.
pub fn cluster_pods(ctx: &Context, cluster: &Cluster<'_>) -> Vec<Arc<Pod>> {
    let statefulset = cluster.statefulset_name();
    (0..MAX_INSTANCES)
        .filter_map(|ordinal| {
            cached(
                &ctx.caches.pods,
                cluster.namespace,
                &format!("{statefulset}-{ordinal}"),
            )
        })
        .filter(|pod| pod.labels().get(CLUSTER_LABEL).map(String::as_str) == Some(cluster.name))
        .collect()
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether the pod named `holder` exists and is ready.
pub fn serves(pods: &[Arc<Pod>], holder: Option<&str>) -> bool {
    holder.is_some_and(|holder| pods.iter().any(|p| p.name_any() == holder && is_ready(p)))
}

/// The IP of the pod named `name`, once it has one.
pub fn pod_ip(pods: &[Arc<Pod>], name: &str) -> Option<String> {
    pods.iter()
        .find(|pod| pod.name_any() == name)
        .and_then(|pod| pod.status.as_ref()?.pod_ip.clone())
}

/// How to reach and trust the instance manager of `pod`, once it has an IP.
pub fn instance_address(cluster: &Cluster<'_>, pod: &Pod) -> Option<InstanceAddress> {
    let ip = pod.status.as_ref()?.pod_ip.clone()?;
    let name = pod.name_any();
    Some(InstanceAddress {
        namespace: cluster.namespace.to_owned(),
        cluster: cluster.name.to_owned(),
        server_name: format!("{name}.{}", cluster.peer_domain()),
        tls: pod.labels().contains_key(STATUS_TLS_LABEL),
        server_secret: cluster.server_tls_secret_name(),
        token_secret: cluster.monitoring_secret_name(),
        pod: name,
        ip,
        ca_fingerprint: None,
    })
}

/// [`instance_address`], with the CA bundle the cached server Secret records.
pub fn known_instance_address(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pod: &Pod,
) -> Option<InstanceAddress> {
    let mut address = instance_address(cluster, pod)?;
    let server = ctx
        .caches
        .secrets
        .get(cluster.namespace, &address.server_secret);
    address.ca_fingerprint = server.and_then(|s| tls::recorded_ca(&s).map(str::to_owned));
    Some(address)
}

/// The report of the manager of the pod named `name`, if it has an IP and answers.
pub async fn read_report(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[Arc<Pod>],
    name: &str,
) -> Option<InstanceStatus> {
    let pod = pods.iter().find(|pod| pod.name_any() == name)?;
    ctx.instances
        .report(&known_instance_address(ctx, cluster, pod)?)
        .await
}

/// Sets the role label of `pod` (server-side apply of that one label, Tusk's field manager).
pub async fn set_role(ctx: &Context, cluster: &Cluster<'_>, pod: &Pod, role: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let name = pod.name_any();
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {ROLE_LABEL: role}},
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    // Deleted meanwhile: its replacement is labelled on the next reconcile.
    unless_gone(
        api.patch(&name, &params, &Patch::Apply(&patch)).await,
        "Pod",
        &name,
    )?;
    Ok(())
}
