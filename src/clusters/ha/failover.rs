//! Failover: the holder's pod does not serve, so the Lease is handed on once it has gone
//! unrenewed for its whole duration (on the operator's own clock), to the most advanced replica
//! that may take it (`election`). A holder that keeps renewing without serving is asked to let
//! go once it has not served for [`UNREADY_LIMIT`] and a replica could take over.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use super::election::{Decision, InstanceStatus, candidate, decide, quorum, reports_needed};
use super::lease;
use super::pods::{DatabasePod, known_instance_address, serves, set_role};
use super::routing;
use super::state::PrimaryState;
use crate::crd::Failover;
use crate::error::Result;
use crate::resources::{Cluster, ROLE_REPLICA};
use crate::runtime::Context;
use crate::runtime::status::now;

/// How long a holder may renew its Lease without serving (PostgreSQL that never starts, a full
/// disk, a crash recovery that does not end) before it is asked to release it.
pub const UNREADY_LIMIT: Duration = Duration::from_secs(60);

/// Watches the Lease of a holder whose pod does not serve and hands it on when it expired.
pub async fn watch_lost_primary(
    cluster: &Cluster<'_>,
    ctx: &Context,
    leases: &Api<Lease>,
    lease: Lease,
    pods: &[DatabasePod],
    state: &mut PrimaryState,
) -> Result<()> {
    let key = lease::clock_key(cluster);
    let version = lease.metadata.resource_version.clone().unwrap_or_default();
    let unchanged = ctx.lease_clock.observe(&key, &version);
    let unready = ctx.lease_clock.unready_for(&key);
    let from = state.current.clone().unwrap_or_default();
    match decide(
        serves(pods, state.current.as_deref()),
        unchanged,
        lease::duration(),
    ) {
        Decision::Healthy => {
            ctx.lease_clock.serving(&key);
            Ok(())
        }
        Decision::Wait { recheck } => {
            state.recheck = Some(recheck);
            if unready > UNREADY_LIMIT && lease::release_requested(&lease).is_none() {
                let reports = read_reports(ctx, cluster, pods, &from).await;
                let needed =
                    reports_needed(standbys(cluster, &lease, pods, &from), sync_number(cluster));
                if candidate(&reports, &from, needed).is_ok()
                    && lease::request_release(leases, lease, &from, cluster).await?
                {
                    state.release_requested = Some(format!(
                        "primary {from} has renewed its Lease without serving for {}s: asked it \
                         to release the Lease so that a replica takes over",
                        unready.as_secs()
                    ));
                }
            }
            Ok(())
        }
        Decision::Expired => {
            let reports = read_reports(ctx, cluster, pods, &from).await;
            let needed =
                reports_needed(standbys(cluster, &lease, pods, &from), sync_number(cluster));
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
            // Out of `-rw` first: no client is routed to the old primary from here on (its
            // label keeps it out of `-ro` too). Usually a no-op: the reconcile that saw it
            // unready already emptied the slice.
            let unrouting = routing::route(ctx, cluster, pods, None, false, false);
            state.unrouted = match pods.iter().find(|p| p.name == from) {
                Some(old) => {
                    let relabel = set_role(ctx, cluster, old, ROLE_REPLICA);
                    let (unrouted, ()) = futures::try_join!(unrouting, relabel)?;
                    state.relabelled.push((from.clone(), ROLE_REPLICA));
                    unrouted
                }
                None => unrouting.await?,
            };
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

/// The standbys that may hold the last acknowledged commits: every member the Lease lists and
/// every pod that exists, but the holder. Not `instances - 1`: after a scale-down with the
/// primary on a removed ordinal there are more.
fn standbys(cluster: &Cluster<'_>, lease: &Lease, pods: &[DatabasePod], holder: &str) -> usize {
    let mut members: BTreeSet<String> = lease::members(lease).into_iter().collect();
    members.extend(cluster.pod_names());
    members.extend(pods.iter().map(|pod| pod.name.clone()));
    members.remove(holder);
    members.len()
}

/// `ANY n` of `spec.replication.synchronous`, if set with `required` durability.
fn sync_number(cluster: &Cluster<'_>) -> Option<usize> {
    let replication = cluster.spec.replication.as_ref()?;
    quorum(replication.synchronous.as_ref())
}

/// The `/status` of every instance but `holder` that has a pod IP, read concurrently. A report
/// naming another pod than the one asked (its IP reused) is not that pod's: it is dropped.
async fn read_reports(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[DatabasePod],
    holder: &str,
) -> Vec<InstanceStatus> {
    let reads = pods
        .iter()
        .filter(|pod| pod.name != holder)
        .filter_map(|pod| known_instance_address(ctx, cluster, pod))
        .map(|address| async move {
            let report = ctx.instances.report(&address).await?;
            (report.pod == address.pod).then_some(report)
        });
    futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect()
}
