//! Stand-ins for what the peers' containers would do that their operators wait for. kwok runs
//! no container: it plays the kubelet (pods become Running and Ready), and here the benchmark
//! plays the one visible act of each peer's container that its operator blocks on, so that each
//! gets as far as kwok can let it:
//! - CloudNativePG: the initdb Job's pod exits 0 (the e2e.tusk.dev/exit-code annotation, which
//!   e2e/local/stages.yaml turns into a Succeeded pod), as `initdb` would;
//! - Zalando: Patroni labels its pod spilo-role=master, as the only member's Patroni would;
//!   without it the operator waits 10 minutes (pod_label_wait_timeout) per cluster.
//!
//! The stand-ins' requests are the benchmark's own (admin), not counted as the operator's.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;

use super::operators::Operator;

const MANAGER: &str = "tusk-scale-standin";

/// Starts the stand-in of `operator`'s containers, if it needs one; it runs until aborted.
pub fn start(client: &Client, operator: Operator) -> Option<JoinHandle<()>> {
    let (selector, patch) = match operator {
        Operator::Tusk => return None,
        Operator::Cnpg => (
            "cnpg.io/jobRole=initdb",
            json!({"metadata": {"annotations": {"e2e.tusk.dev/exit-code": "0"}}}),
        ),
        Operator::Zalando => (
            "application=spilo,!spilo-role",
            json!({"metadata": {"labels": {"spilo-role": "master"}}}),
        ),
    };
    let pods: Api<Pod> = Api::all(client.clone());
    let config = watcher::Config::default().labels(selector);
    Some(tokio::spawn(async move {
        let patch = &patch;
        let pods = &pods;
        watcher(pods.clone(), config)
            .default_backoff()
            .applied_objects()
            .for_each_concurrent(16, |pod| async move {
                let Ok(pod) = pod else { return };
                if !running(&pod) || pod.metadata.deletion_timestamp.is_some() {
                    return;
                }
                let Some(ns) = pod.namespace() else { return };
                let api: Api<Pod> = Api::namespaced(pods.clone().into_client(), &ns);
                // A failed patch (the pod went away) is retried by the next event, if any.
                let _ = api
                    .patch(
                        &pod.name_any(),
                        &PatchParams::apply(MANAGER),
                        &Patch::Merge(patch),
                    )
                    .await;
            })
            .await;
    }))
}

fn running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}
