//! The creation lane: a third queue that runs the same reconcile, for clusters whose children
//! are still to be created. A first reconcile waits seconds on the API server (its Services'
//! ClusterIPs are allocated one at a time, under one lock, for the whole cluster), and with all
//! clusters in one queue a burst of new ones holds every slot: a restart with 1,277 clusters
//! still converging went through the 8,700 converged ones at ~300 a minute instead of seconds,
//! and a spec change to a running cluster waits behind the burst the same way. So the main
//! queue hands a cluster without its StatefulSet over to this lane and moves on; the lane
//! creates it with the same concurrency (the API server sees the same load), and the
//! StatefulSet's watch event gives the cluster back to the main queue. The queues take turns
//! on a cluster (`runtime::cluster_locks`); the hand-over is decided before the turn is taken,
//! so the main queue never waits on a creation.

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

use crate::crd::PostgreSQL;
use crate::resources::Cluster;
use crate::runtime::Context;

/// Whether the main queue leaves `pg` to the creation lane: a lane is running, and the cluster
/// is not being deleted (its finalizer is the main queue's) and has no StatefulSet yet. A spec
/// the operator cannot read as a cluster stays on the main queue: refusing it writes only its
/// status.
pub fn hand_over(pg: &PostgreSQL, ctx: &Context) -> bool {
    let Some(lane) = &ctx.creation_lane else {
        return false;
    };
    if !still_new(pg, ctx) {
        return false;
    }
    // The receiver goes away only when the controllers stop; the main queue then reconciles.
    lane.unbounded_send(ObjectRef::from_obj(pg)).is_ok()
}

/// Whether `pg` is not being deleted and its StatefulSet is still to be created, as the cache
/// sees it. The lane's reconcile lets a cluster go once this is false: the main queue has it
/// then (the StatefulSet's event triggered it), so a look the lane scheduled earlier ends
/// there instead of reconciling twice.
pub fn still_new(pg: &PostgreSQL, ctx: &Context) -> bool {
    if pg.meta().deletion_timestamp.is_some() {
        return false;
    }
    let Ok(cluster) = Cluster::new(pg) else {
        return false;
    };
    !ctx.caches
        .statefulsets
        .contains(cluster.namespace, &cluster.statefulset_name())
}
