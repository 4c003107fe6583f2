//! High availability: who is primary, and keeping it so. The primary Lease decides (its holder
//! is the only instance that may accept writes); the operator creates it once, hands it over
//! when its holder is lost (`failover`) or asked to move (`switchover`), restarts pods replicas
//! first (`rollout`), and labels every pod with its role, which routes the `-rw` and `-ro`
//! Services. docs/replication.md is the contract with the instance managers.
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
pub mod state;
pub mod switchover;
pub mod switchover_plan;

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;

use self::pods::{cluster_pods, is_ready, serves, set_role};
use self::rollout_plan::Move;
pub use self::state::{PrimaryState, SwitchoverNote};
use crate::crd::{InstanceState, PostgreSQL};
use crate::error::Result;
use crate::resources::{Cluster, ROLE_LABEL, ROLE_PRIMARY, ROLE_REPLICA};
use crate::runtime::Context;

/// Creates the Lease once, fails over when its holder is lost, and labels every pod with its
/// role. Failover is considered only for replicated clusters that have served before: until
/// ordinal 0 has initialised the database there is nothing a replica could take over.
pub async fn step(pg: &PostgreSQL, cluster: &Cluster<'_>, ctx: &Context) -> Result<PrimaryState> {
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let pods = cluster_pods(ctx, cluster);
    let status = pg.status.as_ref();
    let mut state = PrimaryState {
        current: status.and_then(|s| s.current_primary.clone()),
        ..PrimaryState::default()
    };
    if state.current.is_none() {
        let (current, written) = lease::ensure(&leases, cluster).await?;
        state.current = current;
        state.writes.extend(written);
    }
    if status.is_some_and(|s| s.instances != cluster.spec.instances) {
        lease::sync_members(cluster, &leases).await?;
    }
    let served = pg.has_served();
    let next = match state.current.as_deref() {
        Some(primary) if served => rollout::next(cluster, ctx, &pods, primary),
        _ => Move::Idle,
    };
    let planned = match &next {
        Move::Switchover { candidates, why } => Some((candidates.as_slice(), why.as_str())),
        _ => None,
    };
    let switching = if served {
        let outcome = Box::pin(switchover::advance(pg, cluster, ctx, &pods, planned)).await?;
        outcome.fold_into(&mut state)
    } else {
        false
    };
    if served
        && !switching
        && cluster.spec.instances > 1
        && !serves(&pods, state.current.as_deref())
    {
        failover::watch_lost_primary(cluster, status, ctx, &leases, &pods, &mut state).await?;
    }
    label_roles(ctx, cluster, &pods, &mut state).await?;
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
    pods: &[Arc<Pod>],
    state: &mut PrimaryState,
) -> Result<()> {
    for pod in pods {
        let name = pod.name_any();
        let role = if state.current.as_deref() == Some(name.as_str()) {
            ROLE_PRIMARY
        } else {
            ROLE_REPLICA
        };
        let labelled = pod.labels().get(ROLE_LABEL).map(String::as_str) == Some(role)
            || (role == ROLE_REPLICA && state.relabelled.contains(&name));
        if !labelled {
            set_role(ctx, cluster, pod, role).await?;
        }
        state.instances.push(InstanceState {
            pod: name,
            role: role.to_owned(),
            ready: is_ready(pod),
        });
    }
    Ok(())
}
