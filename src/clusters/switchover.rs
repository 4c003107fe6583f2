//! Switchover on request, the I/O around `switchover_plan`: reads the request annotation and
//! the primary Lease, asks the target's instance manager how far it has replayed, and writes
//! the Lease (ask, hand over, or abandon) and the request's removal. Runs only while a request
//! or a switchover exists, so it costs an idle cluster nothing.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

use super::election::{InstanceReport, most_advanced};
use super::handover_record::unrecorded;
use super::primary::{PrimaryState, SwitchoverNote, hand_over, holder, read_lease, replace_lease};
use super::switchover_plan::{LeaseSwitchover, SwitchoverStep, plan};
use crate::crd::{Failover, PostgreSQL};
use crate::error::{Error, Result};
use crate::resources::{
    Cluster, FINAL_LSN_ANNOTATION, SWITCHOVER_ANNOTATION, SWITCHOVER_FROM_ANNOTATION,
    SWITCHOVER_STARTED_ANNOTATION,
};
use crate::runtime::Context;
use crate::runtime::apply::FIELD_MANAGER;
use crate::runtime::status::now;

/// How often a switchover in progress is looked at: the target's promotion waits on it.
const POLL: Duration = Duration::from_millis(200);

/// Carries a switchover one step further: one requested with the annotation, or the
/// operator's own (`planned`: the candidates and why, when a rolling update or a scale-down
/// must move the primary). `true` while one is in progress (the old primary is meant to be
/// down then: no failover for it).
pub async fn step(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    ctx: &Context,
    pods: &[Arc<Pod>],
    state: &mut PrimaryState,
    planned: Option<(&[String], &str)>,
) -> Result<bool> {
    let explicit = pg.annotations().get(SWITCHOVER_ANNOTATION).cloned();
    let recorded = pg.status.as_ref().and_then(|s| s.target_primary.clone());
    if explicit.is_none() && recorded.is_none() && planned.is_none() {
        return Ok(false);
    }
    if explicit.is_some() && planned.is_none() && cluster.spec.instances < 2 {
        let why = "a single-instance cluster has no replica to switch over to".to_owned();
        return Ok(refuse(state, SwitchoverNote::Rejected(why)));
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let lease = read_lease(&leases, &cluster.lease_name()).await?;
    let facts = lease_switchover(&lease);
    let (request, why) = match (explicit, planned) {
        (Some(target), _) => (Some(target), "requested".to_owned()),
        (None, Some((candidates, why))) if facts.to.is_none() => {
            let Some(target) = most_advanced_of(ctx, pods, candidates).await else {
                let why = format!("{why}, but no ready replica streams: the primary stays");
                state.switchover = Some(SwitchoverNote::Blocked(why));
                state.recheck = Some(Duration::from_secs(2));
                return Ok(false);
            };
            (Some(target), why.to_owned())
        }
        _ => (None, String::new()),
    };
    let target_name = facts.to.clone().or_else(|| request.clone());
    let report = match target_name.as_deref() {
        Some(target) => read_report(ctx, pods, target).await,
        None => None,
    };
    let step = plan(
        request.as_deref(),
        &facts,
        &cluster.pod_names(),
        report.as_ref(),
    );
    state.current = holder(&lease).or_else(|| state.current.clone());
    // A handover this step made in an earlier reconcile, whose status was not written.
    state.failover = unrecorded(&lease, pg.status.as_ref());
    match step {
        SwitchoverStep::Idle => Ok(false),
        SwitchoverStep::Done => {
            state.request_done = true;
            Ok(false)
        }
        SwitchoverStep::Reject(why) => Ok(refuse(state, SwitchoverNote::Rejected(why))),
        SwitchoverStep::Start { target } => {
            let from = facts.holder.clone().unwrap_or_default();
            if ask(&leases, lease, &from, &target).await? {
                state.switchover = Some(SwitchoverNote::Started {
                    from,
                    to: target.clone(),
                    why,
                });
            }
            state.target = Some(target);
            state.recheck = Some(POLL);
            Ok(true)
        }
        SwitchoverStep::Wait => {
            state.target = target_name;
            state.recheck = Some(POLL);
            Ok(true)
        }
        SwitchoverStep::HandOver { target } => {
            let record = Failover {
                from: facts.from.clone().unwrap_or_default(),
                to: target.clone(),
                reason: "Switchover".to_owned(),
                at: now(),
                seconds: Some(facts.elapsed.as_secs_f64()),
            };
            if !hand_over(&leases, lease, Some(&target), Some(&record), pods, cluster).await? {
                state.target = Some(target);
                state.recheck = Some(Duration::ZERO);
                return Ok(true);
            }
            ctx.lease_clock
                .forget(&format!("{}/{}", cluster.namespace, cluster.lease_name()));
            state.failover = Some(record);
            state.current = Some(target);
            // Soon again: the role labels follow the promotion.
            state.recheck = Some(POLL);
            state.request_done = true;
            Ok(true)
        }
        SwitchoverStep::Abort { give_back, why } => {
            if !hand_over(&leases, lease, give_back.as_deref(), None, pods, cluster).await? {
                state.recheck = Some(Duration::ZERO);
                return Ok(true);
            }
            if give_back.is_some() {
                state.current = give_back;
            }
            refuse(state, SwitchoverNote::Aborted(why));
            // The old primary restarts now: look again soon rather than fail it over.
            state.recheck = Some(POLL);
            Ok(true)
        }
    }
}

/// The switchover recorded on `lease`.
fn lease_switchover(lease: &Lease) -> LeaseSwitchover {
    let annotation = |key: &str| {
        lease
            .annotations()
            .get(key)
            .filter(|v| !v.is_empty())
            .cloned()
    };
    let elapsed = annotation(SWITCHOVER_STARTED_ANNOTATION)
        .and_then(|at| at.parse::<Timestamp>().ok())
        .and_then(|at| Duration::try_from(Timestamp::now().duration_since(at)).ok())
        // No start recorded: a switchover nobody can time is abandoned.
        .unwrap_or(Duration::MAX);
    LeaseSwitchover {
        holder: holder(lease),
        to: annotation(SWITCHOVER_ANNOTATION),
        from: annotation(SWITCHOVER_FROM_ANNOTATION),
        final_lsn: annotation(FINAL_LSN_ANNOTATION),
        elapsed,
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
    replace_lease(leases, &name, &lease).await
}

/// Ends a request that will not (or no longer) be carried out, with its Event.
fn refuse(state: &mut PrimaryState, note: SwitchoverNote) -> bool {
    state.request_done = true;
    state.target = None;
    state.switchover = Some(note);
    false
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
    match api.patch(&name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Apply {
            kind: "PostgreSQL".to_owned(),
            name,
            source,
        }),
    }
}

/// The `/status` of the instance manager of pod `name`, if it answers.
async fn read_report(ctx: &Context, pods: &[Arc<Pod>], name: &str) -> Option<InstanceReport> {
    let pod = pods.iter().find(|pod| pod.name_any() == name)?;
    let ip = pod.status.as_ref()?.pod_ip.clone()?;
    ctx.instances.report(&ip).await
}

/// The most advanced of `candidates` that streams, by their managers' reports.
async fn most_advanced_of(
    ctx: &Context,
    pods: &[Arc<Pod>],
    candidates: &[String],
) -> Option<String> {
    let reads = candidates.iter().map(|pod| read_report(ctx, pods, pod));
    let reports: Vec<InstanceReport> = futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .filter(|r| r.wal_receiver.as_deref() == Some("streaming"))
        .collect();
    most_advanced(&reports, "").map(|r| r.pod.clone())
}
