//! Switchover on request, the I/O around `switchover_plan`: reads the request annotation and
//! the primary Lease, asks the target's instance manager how far it has replayed, and writes
//! the Lease (ask, hand over, or abandon) and the request's removal. Runs only while a request
//! or a switchover exists, so it costs an idle cluster nothing.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;

use super::election::{InstanceStatus, most_advanced};
use super::handover_record::unrecorded;
use super::lease::{self, holder};
use super::pods::{DatabasePod, read_report};
use super::state::{PrimaryState, SwitchoverNote};
use super::switchover_plan::{LeaseSwitchover, SwitchoverStep, plan};
use crate::crd::{Failover, PostgreSQL};
use crate::error::Result;
use crate::resources::{
    Cluster, FINAL_LSN_ANNOTATION, SWITCHOVER_ANNOTATION, SWITCHOVER_FROM_ANNOTATION,
    SWITCHOVER_STARTED_ANNOTATION,
};
use crate::runtime::Context;
use crate::runtime::apply::{FIELD_MANAGER, unless_gone};
use crate::runtime::status::now;

/// How often a switchover in progress is looked at: the target's promotion waits on it.
const POLL: Duration = Duration::from_millis(200);

/// What one switchover step found and did; [`Advanced::fold_into`] hands it to the primary
/// step's state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Advanced {
    /// A switchover is in progress: the old primary is meant to be down, no failover for it.
    pub in_progress: bool,
    /// The Lease's holder as this step left it, when the step read or wrote the Lease.
    pub current: Option<String>,
    /// A handover this step made, or one an earlier step made whose status was not written.
    pub failover: Option<Failover>,
    /// The instance the switchover in progress hands the Lease to.
    pub target: Option<String>,
    pub note: Option<SwitchoverNote>,
    /// The request annotation was carried out or refused.
    pub request_done: bool,
    pub recheck: Option<Duration>,
}

impl Advanced {
    /// Records this step in `state`; returns whether a switchover is in progress.
    pub fn fold_into(self, state: &mut PrimaryState) -> bool {
        if self.current.is_some() {
            state.current = self.current;
        }
        if self.failover.is_some() {
            state.failover = self.failover;
        }
        state.target = self.target;
        state.switchover = self.note;
        state.request_done |= self.request_done;
        if self.recheck.is_some() {
            state.recheck = self.recheck;
        }
        self.in_progress
    }

    /// Ends a request that will not (or no longer) be carried out, with its Event.
    fn refused(mut self, note: SwitchoverNote) -> Self {
        self.request_done = true;
        self.target = None;
        self.note = Some(note);
        self.in_progress = false;
        self
    }

    /// In progress towards `target`; look again after `recheck`.
    fn towards(mut self, target: Option<String>, recheck: Duration) -> Self {
        self.in_progress = true;
        self.target = target;
        self.recheck = Some(recheck);
        self
    }
}

/// Carries a switchover one step further: one requested with the annotation, the operator's
/// own (`planned`: the candidates and why, when a rolling update or a scale-down must move the
/// primary), or one recorded on `lease` (as read this reconcile) whatever the status says.
pub async fn advance(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    ctx: &Context,
    pods: &[DatabasePod],
    lease: &Lease,
    planned: Option<(&[String], &str)>,
) -> Result<Advanced> {
    let none = Advanced::default();
    let explicit = pg.annotations().get(SWITCHOVER_ANNOTATION).cloned();
    let recorded = pg.status.as_ref().and_then(|s| s.target_primary.clone());
    let key = lease::clock_key(cluster);
    if explicit.is_none()
        && recorded.is_none()
        && planned.is_none()
        && !lease::switchover_recorded(lease)
    {
        ctx.lease_clock.switching_for(&key, None);
        return Ok(none);
    }
    if explicit.is_some() && planned.is_none() && cluster.spec.instances < 2 {
        let why = "a single-instance cluster has no replica to switch over to".to_owned();
        return Ok(none.refused(SwitchoverNote::Rejected(why)));
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let lease = lease.clone();
    let mut facts = lease_switchover(&lease);
    // Timed on this operator's own clock, since it first saw this switchover (the start on the
    // Lease is another host's wall clock after a leader change): a restarted operator gives it
    // the full timeout again, late but never early.
    facts.elapsed = ctx.lease_clock.switching_for(&key, facts.to.as_deref());
    let (request, why) = match (explicit, planned) {
        (Some(target), _) => (Some(target), "requested".to_owned()),
        (None, Some((candidates, why))) if facts.to.is_none() => {
            let Some(target) = most_advanced_of(ctx, cluster, pods, candidates).await else {
                let why = format!("{why}, but no ready replica streams: the primary stays");
                return Ok(Advanced {
                    note: Some(SwitchoverNote::Blocked(why)),
                    recheck: Some(Duration::from_secs(2)),
                    ..none
                });
            };
            (Some(target), why.to_owned())
        }
        _ => (None, String::new()),
    };
    let target_name = facts.to.clone().or_else(|| request.clone());
    let report = match target_name.as_deref() {
        Some(target) => read_report(ctx, cluster, pods, target).await,
        None => None,
    };
    let step = plan(
        request.as_deref(),
        &facts,
        &cluster.pod_names(),
        report.as_ref(),
    );
    tracing::debug!(
        cluster = cluster.name,
        ?step,
        holder = ?facts.holder,
        final_lsn = ?facts.final_lsn,
        replayed = ?report.as_ref().and_then(|r| r.lsn.replayed.as_deref()),
        "switchover step"
    );
    let read = Advanced {
        current: lease::holder(&lease),
        // A handover this step made in an earlier reconcile, whose status was not written.
        failover: unrecorded(&lease, pg.status.as_ref()),
        ..none
    };
    match step {
        SwitchoverStep::Idle => Ok(read),
        SwitchoverStep::Done => Ok(Advanced {
            request_done: true,
            ..read
        }),
        SwitchoverStep::Reject(why) => Ok(read.refused(SwitchoverNote::Rejected(why))),
        SwitchoverStep::Start { target } => {
            let from = facts.holder.clone().unwrap_or_default();
            let asked = ask(&leases, lease, &from, &target).await?;
            follow(ctx, pg, cluster, &leases);
            let mut advanced = read.towards(Some(target.clone()), POLL);
            if asked {
                advanced.note = Some(SwitchoverNote::Started {
                    from,
                    to: target,
                    why,
                });
            }
            Ok(advanced)
        }
        SwitchoverStep::Wait => {
            follow(ctx, pg, cluster, &leases);
            Ok(read.towards(target_name, POLL))
        }
        SwitchoverStep::HandOver { target } => {
            let record = Failover {
                from: facts.from.clone().unwrap_or_default(),
                to: target.clone(),
                reason: "Switchover".to_owned(),
                at: now(),
                seconds: Some(facts.elapsed.as_secs_f64()),
            };
            if !lease::hand_over(&leases, lease, Some(&target), Some(&record), pods, cluster)
                .await?
            {
                return Ok(read.towards(Some(target), Duration::ZERO));
            }
            ctx.lease_clock.forget(&lease::clock_key(cluster));
            // Soon again: the role labels follow the promotion.
            let mut advanced = read.towards(None, POLL);
            advanced.failover = Some(record);
            advanced.current = Some(target);
            advanced.request_done = true;
            Ok(advanced)
        }
        SwitchoverStep::Abort { give_back, why } => {
            if !lease::hand_over(&leases, lease, give_back.as_deref(), None, pods, cluster).await? {
                return Ok(Advanced {
                    in_progress: true,
                    recheck: Some(Duration::ZERO),
                    ..read
                });
            }
            let mut advanced = read.refused(SwitchoverNote::Aborted(why));
            if give_back.is_some() {
                advanced.current = give_back;
            }
            // The old primary restarts now: look again soon rather than fail it over.
            advanced.in_progress = true;
            advanced.recheck = Some(POLL);
            Ok(advanced)
        }
    }
}

/// Puts `pg` on the primary lane at each change of its Lease until the switchover recorded
/// there ends: the old primary's release is handed over at once, not at the next look.
fn follow(ctx: &Context, pg: &PostgreSQL, cluster: &Cluster<'_>, leases: &Api<Lease>) {
    ctx.lease_follows.follow(
        leases.clone(),
        cluster.lease_name(),
        ObjectRef::from_obj(pg),
        lease::switchover_recorded,
    );
}

/// The switchover recorded on `lease`; its `elapsed` is the caller's to set.
fn lease_switchover(lease: &Lease) -> LeaseSwitchover {
    let annotation = |key: &str| {
        lease
            .annotations()
            .get(key)
            .filter(|v| !v.is_empty())
            .cloned()
    };
    LeaseSwitchover {
        holder: holder(lease),
        to: annotation(SWITCHOVER_ANNOTATION),
        from: annotation(SWITCHOVER_FROM_ANNOTATION),
        final_lsn: annotation(FINAL_LSN_ANNOTATION),
        elapsed: Duration::ZERO,
    }
}

/// Asks the holder `from` to hand over to `target` (with the read resourceVersion): `false`
/// when the Lease changed meanwhile (the next reconcile decides again).
async fn ask(leases: &Api<Lease>, mut lease: Lease, from: &str, target: &str) -> Result<bool> {
    let name = lease.name_any();
    let annotations = lease.annotations_mut();
    annotations.insert(SWITCHOVER_ANNOTATION.to_owned(), target.to_owned());
    annotations.insert(SWITCHOVER_FROM_ANNOTATION.to_owned(), from.to_owned());
    annotations.insert(
        SWITCHOVER_STARTED_ANNOTATION.to_owned(),
        Timestamp::now().to_string(),
    );
    annotations.remove(FINAL_LSN_ANNOTATION);
    lease::replace(leases, &name, &lease).await
}

/// Removes the request annotation, if any: a request is carried out once. Called after the
/// status recording what it did is written (`PrimaryState::request_done`): a patch of the
/// object before would make that status write stale.
pub async fn clear_request(pg: &PostgreSQL, ctx: &Context) -> Result<()> {
    if !pg.annotations().contains_key(SWITCHOVER_ANNOTATION) {
        return Ok(());
    }
    let name = pg.name_any();
    let api: Api<PostgreSQL> =
        Api::namespaced(ctx.client.clone(), &pg.namespace().unwrap_or_default());
    let patch = serde_json::json!({"metadata": {"annotations": {SWITCHOVER_ANNOTATION: null}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patched = api.patch(&name, &params, &Patch::Merge(&patch)).await;
    unless_gone(patched, "PostgreSQL", &name)?;
    Ok(())
}

/// The most advanced of `candidates` that streams, by their managers' reports.
async fn most_advanced_of(
    ctx: &Context,
    cluster: &Cluster<'_>,
    pods: &[DatabasePod],
    candidates: &[String],
) -> Option<String> {
    let reads = candidates
        .iter()
        .map(|pod| read_report(ctx, cluster, pods, pod));
    let reports: Vec<InstanceStatus> = futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .filter(|r| r.wal_receiver.as_deref() == Some("streaming"))
        .collect();
    most_advanced(&reports, "").map(|r| r.pod.clone())
}
