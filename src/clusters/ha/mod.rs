//! High availability: who is primary, and keeping it so. The primary Lease decides (its holder
//! is the only instance that may accept writes); the operator creates it once, hands it over
//! when its holder is lost (`failover`) or asked to move (`switchover`), restarts pods replicas
//! first (`rollout`), labels every pod with its role, which routes the `-ro` Service, and
//! writes `-rw`'s EndpointSlice (`routing`). docs/src/design/replication.md is the contract with the instance managers.
//!
//! The decisions are pure and unit-tested on plain values (`election`, `switchover_plan`,
//! `rollout_plan`); the other files are their I/O. This room imports nothing else from
//! `clusters`: the reconcile hands it the cluster and gets a [`PrimaryState`] back.

pub mod election;
mod failover;
mod handover_record;
pub mod lease;
pub mod pods;
mod rollout;
pub mod rollout_plan;
pub mod routing;
pub mod selector_move;
pub mod state;
pub mod switchover;
pub mod switchover_plan;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use self::handover_record::unrecorded;
use self::pods::{DatabasePod, cluster_pods, serves, set_role};
use self::rollout_plan::Move;
pub use self::state::{PrimaryState, SwitchoverNote};
use crate::crd::{InstanceState, PostgreSQL};
use crate::error::Result;
use crate::resources::{Cluster, ROLE_PRIMARY, ROLE_REPLICA};
use crate::runtime::Context;

/// How soon a rollout waiting for the primary's restart in place looks again: the restart
/// follows the ConfigMap reaching the pod's volume (up to a minute or so), and may be too
/// brief for a readiness change to wake the reconcile.
const PRIMARY_FIRST_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Who is primary, and keeping it so: creates the Lease once, reads it on every reconcile of a
/// replicated cluster (the Lease is the truth, not a status that may have missed a handover),
/// carries a switchover on, fails over when the holder is lost, and labels every pod with its
/// role. Failover is considered once the cluster has bootstrapped (its system identifier is
/// recorded, or it served): until ordinal 0 has initialised the database there is nothing a
/// replica could take over. Nothing else of the reconcile (the children, the spec's validity,
/// the phase) gates it.
pub async fn step(pg: &PostgreSQL, cluster: &Cluster<'_>, ctx: &Context) -> Result<PrimaryState> {
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let pods = cluster_pods(ctx, cluster);
    let status = pg.status.as_ref();
    let mut state = PrimaryState {
        current: status.and_then(|s| s.current_primary.clone()),
        system_identifier: status.and_then(|s| s.system_identifier.clone()),
        ..PrimaryState::default()
    };
    // One GET per reconcile of a replicated cluster (not a watch: renewals every second would
    // wake the operator for every cluster). A single instance's holder never changes.
    let replicated = cluster.spec.instances > 1 || pods.len() > 1;
    let lease = if state.current.is_none() {
        let (lease, written) = lease::ensure(&leases, cluster).await?;
        state.writes.extend(written);
        Some(lease)
    } else if replicated {
        Some(lease::read(&leases, &cluster.lease_name()).await?)
    } else {
        None
    };
    if let Some(lease) = &lease {
        if let Some(holder) = lease::holder(lease) {
            state.current = Some(holder);
        }
        // A handover whose status write was lost is adopted from the Lease, with its Event.
        state.failover = unrecorded(lease, status);
        state.system_identifier = state
            .system_identifier
            .take()
            .or_else(|| lease::system_identifier(lease));
    }
    let mut lease = lease;
    if status.is_some_and(|s| s.instances != cluster.spec.instances) {
        lease = Some(lease::sync_members(cluster, &leases, lease.take()).await?);
    }
    // Emptied by an upgrade's switch that the status has not recorded yet: the set is fenced
    // for good, so nothing is handed on, restarted or switched over; the upgrade completes it.
    // Or stopped by an in-place upgrade, until its upgraded primary serves: no replica holds
    // the new system to fail over to, and the stop is the upgrade's.
    let held_in_place = (status.and_then(|s| s.upgrade.as_ref())).is_some_and(|u| u.holds_ha());
    let fenced_for_upgrade = held_in_place || lease.as_ref().and_then(lease::switched_to).is_some();
    let bootstrapped = state.system_identifier.is_some() || pg.has_served();
    let next = match state.current.as_deref() {
        Some(primary) if bootstrapped && !fenced_for_upgrade => {
            rollout::next(cluster, ctx, &pods, primary).await
        }
        _ => Move::Idle,
    };
    let planned = match &next {
        Move::Switchover { candidates, why } => Some((candidates.as_slice(), why.as_str())),
        _ => None,
    };
    let switching = match &lease {
        Some(lease) if bootstrapped && !fenced_for_upgrade => {
            let advanced = switchover::advance(pg, cluster, ctx, &pods, lease, planned);
            Box::pin(advanced).await?.fold_into(&mut state)
        }
        _ => false,
    };
    if let Some(lease) = lease
        && bootstrapped
        && !switching
        && !fenced_for_upgrade
        && replicated
        && !serves(&pods, state.current.as_deref())
    {
        failover::watch_lost_primary(cluster, ctx, &leases, lease, &pods, &mut state).await?;
    } else {
        ctx.lease_clock.serving(&lease::clock_key(cluster));
    }
    label_roles(ctx, cluster, &pods, &mut state).await?;
    if let Move::PrimaryFirst { lowered } = &next {
        state.primary_first = Some(lowered.clone());
        state.recheck = Some(
            state
                .recheck
                .map_or(PRIMARY_FIRST_RECHECK, |r| r.min(PRIMARY_FIRST_RECHECK)),
        );
    }
    if let (Move::Restart { pod }, false, None) = (&next, switching, &state.failover) {
        rollout::restart(ctx, cluster, pod).await?;
        state.restarted = Some(pod.clone());
    }
    Ok(state)
}

/// Labels every pod `primary` (the holder) or `replica`, and reports the instances.
async fn label_roles(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[DatabasePod],
    state: &mut PrimaryState,
) -> Result<()> {
    for pod in pods {
        let name = pod.name.clone();
        let role = if state.current.as_deref() == Some(name.as_str()) {
            ROLE_PRIMARY
        } else {
            ROLE_REPLICA
        };
        // What this reconcile set counts, not the cache (which does not show it yet); a label
        // set to something else (a handover that lost its conflict) is put right.
        let set_now = state
            .relabelled
            .iter()
            .find(|(pod, _)| *pod == name)
            .map(|(_, set)| *set);
        let labelled = match set_now {
            Some(set) => set == role,
            None => pod.role.as_deref() == Some(role),
        };
        if !labelled {
            set_role(ctx, cluster, pod, role).await?;
        }
        state.instances.push(InstanceState {
            pod: name,
            role: role.to_owned(),
            ready: pod.ready,
        });
    }
    Ok(())
}
