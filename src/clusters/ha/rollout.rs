//! Restarts of a replicated cluster's pods, replicas first (the I/O around `rollout_plan`):
//! reads the cached pods and the StatefulSet's update revision, and deletes the pod the plan
//! names, asking the primary's manager what it runs when the update may lower a hot-standby
//! setting. The primary's own move is a switchover, carried out by `switchover`.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use super::pods::{DatabasePod, read_report};
use super::rollout_plan::{Member, Move, next_move};
use crate::error::Result;
use crate::resources::{Cluster, hot_standby_values};
use crate::runtime::Context;
use crate::runtime::apply::unless_gone;

/// The next move for `cluster`, from the caches; `primary`: the Lease holder.
pub async fn next(
    cluster: &Cluster<'_>,
    ctx: &Context,
    pods: &[DatabasePod],
    primary: &str,
) -> Move {
    let revision = ctx
        .caches
        .statefulsets
        .object(cluster.namespace, &cluster.statefulset_name())
        .and_then(update_revision);
    let kept = cluster.kept_pods();
    let members: Vec<Member> = pods
        .iter()
        .filter_map(|pod| {
            let ordinal = cluster.ordinal(&pod.name).filter(|o| *o < kept)?;
            let updated = revision
                .as_deref()
                .is_none_or(|rev| pod.revision.as_deref() == Some(rev));
            Some(Member {
                pod: pod.name.clone(),
                ordinal,
                ready: pod.ready,
                updated,
            })
        })
        .collect();
    let rolling = cluster.spec.instances > 1;
    let replica_outdated = members.iter().any(|m| m.pod != primary && !m.updated);
    let lowered = if rolling && replica_outdated {
        lowered_on_primary(cluster, ctx, pods, primary).await
    } else {
        Vec::new()
    };
    next_move(&members, primary, cluster.spec.instances, rolling, &lowered)
}

/// The hot-standby settings the spec sets below what the primary runs, as its manager
/// reports them (none when it does not answer or does not report them: the rollout then goes
/// replicas first as before).
async fn lowered_on_primary(
    cluster: &Cluster<'_>,
    ctx: &Context,
    pods: &[DatabasePod],
    primary: &str,
) -> Vec<String> {
    let Some(report) = read_report(ctx, cluster, pods, primary).await else {
        return Vec::new();
    };
    let desired = hot_standby_values(&cluster.spec.parameters);
    tusk_contract::status::lowered(&report.hot_standby_settings, &desired)
}

fn update_revision(sts: std::sync::Arc<StatefulSet>) -> Option<String> {
    sts.status.as_ref()?.update_revision.clone()
}

/// Deletes `pod` so the StatefulSet recreates it on its update revision.
pub async fn restart(ctx: &Context, cluster: &Cluster<'_>, pod: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    unless_gone(api.delete(pod, &DeleteParams::default()).await, "Pod", pod)?;
    Ok(())
}
