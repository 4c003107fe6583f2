//! The primary: the Lease's first creation, the handover when its holder stops renewing it
//! (failover), and the role labels that route the `-rw` and `-ro` Services. The decisions are
//! in `election`; docs/replication.md is the contract with the instance managers.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};

use super::children::Written;
use super::election::{Decision, candidate, decide, reports_needed};
use super::handover_record::{record_on, unrecorded};
use super::rollout;
use super::rollout_plan::Move;
use super::switchover;
use crate::crd::{Failover, InstanceState, Phase, PostgreSQL, PostgreSQLStatus};
use crate::error::{Error, Result};
use crate::resources::{
    CLUSTER_LABEL, Cluster, HOLDER_ADDRESS_ANNOTATION, LEASE_DURATION_SECONDS, MEMBERS_ANNOTATION,
    ROLE_LABEL, ROLE_PRIMARY, ROLE_REPLICA, SWITCHOVER_LEASE_ANNOTATIONS, holder_address,
    initial_lease,
};
use crate::runtime::Context;
use crate::runtime::apply::{Change, FIELD_MANAGER, create};
use crate::runtime::status::now;

/// What the primary step found and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrimaryState {
    /// The Lease holder: the only instance that may accept writes.
    pub current: Option<String>,
    /// Every database pod, with the role label it carries now.
    pub instances: Vec<InstanceState>,
    /// Set when this reconcile handed the Lease to another instance.
    pub failover: Option<Failover>,
    /// The instance a switchover in progress hands the Lease to.
    pub target: Option<String>,
    /// What this reconcile's switchover step started, refused or abandoned.
    pub switchover: Option<SwitchoverNote>,
    /// The switchover request annotation was carried out or refused: it is removed once the
    /// status recording that is written.
    pub request_done: bool,
    /// The replica this reconcile restarted on the StatefulSet's new revision.
    pub restarted: Option<String>,
    /// A failover is due but no replica can be promoted: why.
    pub stuck: Option<String>,
    /// Look again this soon: a lost primary is being watched.
    pub recheck: Option<Duration>,
    pub writes: Vec<Written>,
    /// Pods whose role label this reconcile already set (the cache does not show it yet).
    pub(super) relabelled: Vec<String>,
}

/// A switchover step worth an Event.
#[derive(Clone, Debug, PartialEq)]
pub enum SwitchoverNote {
    Started {
        from: String,
        to: String,
        why: String,
    },
    Rejected(String),
    Aborted(String),
    /// The operator's own switchover cannot start (no replica to take over).
    Blocked(String),
}

impl PrimaryState {
    /// The state of a cluster whose Lease `pod` holds, with nothing else known.
    pub fn held_by(pod: &str) -> Self {
        Self {
            current: Some(pod.to_owned()),
            ..Self::default()
        }
    }
}

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
        let lease = initial_lease(cluster, MicroTime(Timestamp::now()));
        let change = create(&leases, &lease).await?;
        state.writes.extend(Written::of(&lease, change));
        state.current = match change {
            Change::Created => holder(&lease),
            // Created before (by an earlier reconcile whose status write was lost).
            _ => holder(&read_lease(&leases, &cluster.lease_name()).await?),
        };
    }
    if status.is_some_and(|s| s.instances != cluster.spec.instances) {
        sync_members(cluster, &leases).await?;
    }
    let served = status
        .and_then(|s| s.phase)
        .is_some_and(|p| matches!(p, Phase::Ready | Phase::Degraded));
    let next = match state.current.as_deref() {
        Some(primary) if served => rollout::next(cluster, ctx, &pods, primary),
        _ => Move::Idle,
    };
    let planned = match &next {
        Move::Switchover { candidates, why } => Some((candidates.as_slice(), why.as_str())),
        _ => None,
    };
    let switching = served
        && Box::pin(switchover::step(
            pg, cluster, ctx, &pods, &mut state, planned,
        ))
        .await?;
    if served
        && !switching
        && cluster.spec.instances > 1
        && !serves(&pods, state.current.as_deref())
    {
        watch_lost_primary(cluster, status, ctx, &leases, &pods, &mut state).await?;
    }
    label_roles(ctx, cluster, &pods, &mut state).await?;
    if let (Move::Restart { pod }, false, None) = (&next, switching, &state.failover) {
        rollout::restart(ctx, cluster, pod).await?;
        state.restarted = Some(pod.clone());
    }
    Ok(state)
}

/// The holder's pod does not serve: hand the Lease on once it has gone unrenewed for its whole
/// duration, to the most advanced replica.
async fn watch_lost_primary(
    cluster: &Cluster<'_>,
    status: Option<&PostgreSQLStatus>,
    ctx: &Context,
    leases: &Api<Lease>,
    pods: &[Arc<Pod>],
    state: &mut PrimaryState,
) -> Result<()> {
    let lease = read_lease(leases, &cluster.lease_name()).await?;
    // The Lease is the truth: a handover whose status write was lost is adopted here.
    state.current = holder(&lease);
    state.failover = unrecorded(&lease, status);
    let key = format!("{}/{}", cluster.namespace, cluster.lease_name());
    let version = lease.metadata.resource_version.clone().unwrap_or_default();
    let unchanged = ctx.lease_clock.observe(&key, &version);
    let duration = lease_duration(&lease);
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
            if !hand_over(leases, lease, Some(&target), Some(&record), pods, cluster).await? {
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

/// Brings the Lease's member list (the primary keeps one replication slot per member) up to
/// date after `instances` changed; retried on a conflict with a renewal.
async fn sync_members(cluster: &Cluster<'_>, leases: &Api<Lease>) -> Result<()> {
    let name = cluster.lease_name();
    let members = cluster.pod_names().join(",");
    for _ in 0..3 {
        let mut lease = read_lease(leases, &name).await?;
        if lease.annotations().get(MEMBERS_ANNOTATION) == Some(&members) {
            return Ok(());
        }
        lease
            .annotations_mut()
            .insert(MEMBERS_ANNOTATION.to_owned(), members.clone());
        if replace_lease(leases, &name, &lease).await? {
            return Ok(());
        }
    }
    Err(Error::Invariant(format!(
        "Lease {name}: three conflicting writes while updating its members; retrying"
    )))
}

/// The instances other than the primary.
fn standbys(cluster: &Cluster<'_>) -> usize {
    usize::try_from(cluster.spec.instances.max(1) - 1).unwrap_or(0)
}

/// `ANY n` of `spec.replication.synchronous`, if set with `required` durability.
fn sync_number(cluster: &Cluster<'_>) -> Option<usize> {
    let replication = cluster.spec.replication.as_ref()?;
    crate::clusters::election::quorum(replication.synchronous.as_ref())
}

/// The `/status` of every instance but `holder` that has a pod IP, read concurrently.
async fn read_reports(
    ctx: &Context,
    pods: &[Arc<Pod>],
    holder: &str,
) -> Vec<crate::clusters::election::InstanceReport> {
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

/// Writes `target` as the holder (`None`: leaves the holder as it is) with its pod's IP and the
/// `record` of the handover, with the resourceVersion read, and ends any switchover recorded on
/// the Lease: `false` when the Lease changed meanwhile.
pub(super) async fn hand_over(
    leases: &Api<Lease>,
    mut lease: Lease,
    target: Option<&str>,
    record: Option<&Failover>,
    pods: &[Arc<Pod>],
    cluster: &Cluster<'_>,
) -> Result<bool> {
    let name = cluster.lease_name();
    let now = MicroTime(Timestamp::now());
    let spec = lease.spec.get_or_insert_default();
    if let Some(target) = target {
        spec.holder_identity = Some(target.to_owned());
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        // Standbys repoint to the new holder's IP at once, not after its first renew.
        let ip = pods
            .iter()
            .find(|pod| pod.name_any() == target)
            .and_then(|pod| pod.status.as_ref()?.pod_ip.clone());
        let annotations = lease.annotations_mut();
        match ip {
            Some(ip) => annotations.insert(
                HOLDER_ADDRESS_ANNOTATION.to_owned(),
                holder_address(target, &ip),
            ),
            None => annotations.remove(HOLDER_ADDRESS_ANNOTATION),
        };
    }
    if let Some(record) = record {
        record_on(&mut lease, record);
    }
    let annotations = lease.annotations_mut();
    annotations.insert(MEMBERS_ANNOTATION.to_owned(), cluster.pod_names().join(","));
    for key in SWITCHOVER_LEASE_ANNOTATIONS {
        annotations.remove(key);
    }
    replace_lease(leases, &name, &lease).await
}

/// Writes `lease` back with the resourceVersion it was read at: `false` when it changed
/// meanwhile (a conflict), so no write ever overwrites a renewal or another handover.
pub(super) async fn replace_lease(leases: &Api<Lease>, name: &str, lease: &Lease) -> Result<bool> {
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match leases.replace(name, &params, lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => Err(Error::Apply {
            kind: "Lease".to_owned(),
            name: name.to_owned(),
            source,
        }),
    }
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

/// Sets the role label of `pod` (server-side apply of that one label, Tusk's field manager).
async fn set_role(ctx: &Context, cluster: &Cluster<'_>, pod: &Pod, role: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let name = pod.name_any();
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {ROLE_LABEL: role}},
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api.patch(&name, &params, &Patch::Apply(&patch)).await {
        Ok(_) => Ok(()),
        // Deleted meanwhile: its replacement is labelled on the next reconcile.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Apply {
            kind: "Pod".to_owned(),
            name,
            source,
        }),
    }
}

pub(super) async fn read_lease(leases: &Api<Lease>, name: &str) -> Result<Lease> {
    leases.get(name).await.map_err(|source| Error::Read {
        kind: "Lease".to_owned(),
        name: name.to_owned(),
        source,
    })
}

pub(super) fn holder(lease: &Lease) -> Option<String> {
    let holder = lease.spec.as_ref()?.holder_identity.clone()?;
    (!holder.is_empty()).then_some(holder)
}

fn lease_duration(lease: &Lease) -> Duration {
    let seconds = lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .unwrap_or(LEASE_DURATION_SECONDS);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0).max(1))
}

/// The cached database pods of `cluster`, by name.
pub(super) fn cluster_pods(ctx: &Context, cluster: &Cluster<'_>) -> Vec<Arc<Pod>> {
    let mut pods: Vec<Arc<Pod>> = ctx
        .caches
        .pods
        .state()
        .into_iter()
        .filter(|pod| pod.namespace().as_deref() == Some(cluster.namespace))
        .filter(|pod| pod.labels().get(CLUSTER_LABEL).map(String::as_str) == Some(cluster.name))
        .collect();
    pods.sort_by_key(|pod| pod.name_any());
    pods
}

pub(super) fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether the pod named `holder` exists and is ready.
fn serves(pods: &[Arc<Pod>], holder: Option<&str>) -> bool {
    holder.is_some_and(|holder| pods.iter().any(|p| p.name_any() == holder && is_ready(p)))
}
