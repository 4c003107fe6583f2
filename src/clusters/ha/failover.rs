//! Failover: the holder's pod does not serve, so the Lease is handed on once it has gone
//! unrenewed for its whole duration (on the operator's own clock), to the most advanced replica
//! that may take it (`election`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;

use super::election::{Decision, InstanceStatus, candidate, decide, quorum, reports_needed};
use super::handover_record::unrecorded;
use super::lease;
use super::pods::{serves, set_role};
use super::state::PrimaryState;
use crate::crd::{Failover, PostgreSQLStatus};
use crate::error::Result;
use crate::resources::{Cluster, ROLE_REPLICA};
use crate::runtime::Context;
use crate::runtime::status::now;

/// Watches the Lease of a holder whose pod does not serve and hands it on when it expired.
pub async fn watch_lost_primary(
    cluster: &Cluster<'_>,
    status: Option<&PostgreSQLStatus>,
    ctx: &Context,
    leases: &Api<Lease>,
    pods: &[Arc<Pod>],
    state: &mut PrimaryState,
) -> Result<()> {
    let lease = lease::read(leases, &cluster.lease_name()).await?;
    // The Lease is the truth: a handover whose status write was lost is adopted here.
    state.current = lease::holder(&lease);
    state.failover = unrecorded(&lease, status);
    let key = lease::clock_key(cluster);
    let version = lease.metadata.resource_version.clone().unwrap_or_default();
    let unchanged = ctx.lease_clock.observe(&key, &version);
    let duration = lease::duration(&lease);
    let decision = decide(serves(pods, state.current.as_deref()), unchanged, duration);
    match decision {
        Decision::Healthy => Ok(()),
        Decision::Wait { recheck } => {
            state.recheck = Some(recheck);
            Ok(())
        }
        Decision::Expired => {
            let from = state.current.clone().unwrap_or_default();
            let reports = read_reports(ctx, pods, &from).await;
            let needed = reports_needed(standbys(cluster), sync_number(cluster));
            let target = match candidate(&reports, &from, needed) {
                Ok(target) => target,
                Err(promotable) => {
                    state.stuck = Some(format!(
                        "primary {from} has not renewed its Lease for {}s; {promotable} replica(s) \
                         running and answering, {needed} needed to be sure the promoted one holds \
                         every acknowledged commit",
                        unchanged.as_secs()
                    ));
                    state.recheck = Some(Duration::from_secs(2));
                    return Ok(());
                }
            };
            let target = target.pod.clone();
            // Out of `-rw` first: no client is routed to the old primary from here on.
            if let Some(old) = pods.iter().find(|p| p.name_any() == from) {
                set_role(ctx, cluster, old, ROLE_REPLICA).await?;
                state.relabelled.push(from.clone());
            }
            let record = Failover {
                from,
                to: target.clone(),
                reason: "PrimaryLost".to_owned(),
                at: now(),
                seconds: Some(unchanged.as_secs_f64()),
            };
            if !lease::hand_over(leases, lease, Some(&target), Some(&record), pods, cluster).await?
            {
                // The holder renewed after all (it is alive): look again at once.
                state.recheck = Some(Duration::ZERO);
                return Ok(());
            }
            ctx.lease_clock.forget(&key);
            state.failover = Some(record);
            state.current = Some(target);
            Ok(())
        }
    }
}

/// The instances other than the primary.
fn standbys(cluster: &Cluster<'_>) -> usize {
    usize::try_from(cluster.spec.instances.max(1) - 1).unwrap_or(0)
}

/// `ANY n` of `spec.replication.synchronous`, if set with `required` durability.
fn sync_number(cluster: &Cluster<'_>) -> Option<usize> {
    let replication = cluster.spec.replication.as_ref()?;
    quorum(replication.synchronous.as_ref())
}

/// The `/status` of every instance but `holder` that has a pod IP, read concurrently.
async fn read_reports(ctx: &Context, pods: &[Arc<Pod>], holder: &str) -> Vec<InstanceStatus> {
    let reads = pods
        .iter()
        .filter(|pod| pod.name_any() != holder)
        .filter_map(|pod| pod.status.as_ref()?.pod_ip.clone())
        .map(|ip| async move { ctx.instances.report(&ip).await });
    futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect()
}
