//! The database pods as the primary step sees them (from the watch cache), and their role
//! label: the only thing the operator writes on a pod.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};

use crate::crd::MAX_INSTANCES;
use crate::error::Result;
use crate::resources::{Cluster, ROLE_LABEL, tls};
use crate::runtime::Context;
use crate::runtime::apply::{FIELD_MANAGER, unless_gone};
pub use crate::runtime::database_pods::{DatabasePod, is_ready};
use crate::runtime::instances::{InstanceAddress, InstanceStatus};

/// The cached database pods of `cluster`, by name.
///
/// Looked up by name, not found by scanning the cache: a StatefulSet's pods are
/// `<statefulset>-<ordinal>`, and no ordinal reaches [`MAX_INSTANCES`] (the CRD bounds
/// `instances`, and the primary's pod is kept only below it). A scan cost every reconcile a pass
/// over every pod of the fleet: at 1,000 clusters, 5 % of the operator's CPU while a burst
/// converged, growing with the fleet.
pub fn cluster_pods(ctx: &Context, cluster: &Cluster<'_>) -> Vec<DatabasePod> {
    let statefulset = cluster.statefulset_name();
    (0..MAX_INSTANCES)
        .filter_map(|ordinal| {
            let name = format!("{statefulset}-{ordinal}");
            ctx.caches
                .pods
                .with(cluster.namespace, &name, DatabasePod::clone)
        })
        .filter(|pod| pod.cluster.as_deref() == Some(cluster.name))
        .collect()
}

/// Whether the pod named `holder` exists and is ready.
pub fn serves(pods: &[DatabasePod], holder: Option<&str>) -> bool {
    holder.is_some_and(|holder| pods.iter().any(|p| p.name == holder && p.ready))
}

/// The IP of the pod named `name`, once it has one.
pub fn pod_ip(pods: &[DatabasePod], name: &str) -> Option<String> {
    pods.iter()
        .find(|pod| pod.name == name)
        .and_then(|pod| pod.ip.clone())
}

/// How to reach and trust the instance manager of `pod`, once it has an IP.
pub fn instance_address(cluster: &Cluster<'_>, pod: &DatabasePod) -> Option<InstanceAddress> {
    let ip = pod.ip.clone()?;
    let name = pod.name.clone();
    Some(InstanceAddress {
        namespace: cluster.namespace.to_owned(),
        cluster: cluster.name.to_owned(),
        server_name: format!("{name}.{}", cluster.peer_domain()),
        tls: pod.status_tls,
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
    pod: &DatabasePod,
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
    pods: &[DatabasePod],
    name: &str,
) -> Option<InstanceStatus> {
    let pod = pods.iter().find(|pod| pod.name == name)?;
    ctx.instances
        .report(&known_instance_address(ctx, cluster, pod)?)
        .await
}

/// Sets the role label of `pod` (server-side apply of that one label, Tusk's field manager).
pub async fn set_role(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pod: &DatabasePod,
    role: &str,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let name = &pod.name;
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {ROLE_LABEL: role}},
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    // Deleted meanwhile: its replacement is labelled on the next reconcile.
    unless_gone(
        api.patch(name, &params, &Patch::Apply(&patch)).await,
        "Pod",
        name,
    )?;
    Ok(())
}
