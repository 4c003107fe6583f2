//! What the fault scenarios on real pods share (e2e/tests/replication.rs and
//! replication_faults.rs): a three-instance cluster with its writer, the invariants checked
//! after every fault, and the evidence of a failover — the Lease's transitions, the cluster's
//! FailedOver Events, instance managers' `/status`, a former primary back as a replica.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use tusk::clusters::ha::pods::instance_address;
use tusk::resources::CLUSTER_LABEL;
use tusk::runtime::instance_reader::InstanceReader;
use tusk::runtime::instances::{InstanceAddress, InstanceStatus, Role, StatusSource};

use crate::platform::{OPERATOR_NAMESPACE, OPERATOR_SELECTOR};
use crate::replication::{
    Ack, Writer, current_primary, forked, lost, pod_sql, replicated, row_count, rows, write_gap,
};
use crate::{Check, Context, Ctx, Result, ensure, fail, until};

/// The instance managers' status port (`TUSK_STATUS_PORT`).
const STATUS_PORT: u16 = 8000;

/// Cluster `name` with three instances, Ready, ordinal 0 primary, and its writer running.
pub async fn three_with_writer(ctx: &Ctx, name: &str) -> Result<(String, Writer)> {
    started_with_writer(ctx, name, &replicated(name, 3)).await
}

/// Cluster `name` applied from `manifest`, Ready, ordinal 0 primary, and its writer running.
pub async fn started_with_writer(
    ctx: &Ctx,
    name: &str,
    manifest: &str,
) -> Result<(String, Writer)> {
    ctx.apply(manifest).await?;
    ctx.wait_ready(&[name]).await?;
    let primary = current_primary(ctx, name).await?.unwrap_or_default();
    ensure!(
        primary == format!("{name}-0"),
        "{name}: ordinal 0 initialises and holds the Lease, status says {primary:?}"
    );
    let writer = Writer::start(ctx, name).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    Ok((primary, writer))
}

/// After a fault injected at `fault` whose effect was certain by `landed` (the kill had run,
/// the promotion was seen): every acknowledged row on the primary, no forked timeline; the gap.
pub async fn check_writes(
    ctx: &Ctx,
    name: &str,
    writer: Writer,
    fault: Instant,
    landed: Instant,
) -> Result<Duration> {
    check_acks(ctx, name, writer, fault, landed)
        .await
        .map(|(_, gap)| gap)
}

/// [`check_writes`], also returning the writer's acknowledgements.
pub async fn check_acks(
    ctx: &Ctx,
    name: &str,
    writer: Writer,
    fault: Instant,
    landed: Instant,
) -> Result<(Vec<Ack>, Duration)> {
    writer.wait_ack_after(landed, ctx.timeout()).await?;
    let acks = writer.stop();
    let present = rows(ctx, name).await?;
    let missing = lost(&acks, &present);
    ensure!(
        missing.is_empty(),
        "{} acknowledged rows lost: {missing:?}",
        missing.len()
    );
    if let Some((before, after)) = forked(&acks) {
        fail!(
            "row {} on timeline {} after row {} on {}",
            after.n,
            after.timeline,
            before.n,
            before.timeline
        );
    }
    let gap = write_gap(&acks, fault).context("no acknowledgement around the fault")?;
    Ok((acks, gap))
}

/// `kill -9` of the postmaster in `pod` (the PID in its `postmaster.pid`): the state a crash
/// leaves, the instance manager and the pod untouched.
pub const KILL_POSTMASTER: &str = "kill -9 $(head -1 /var/lib/postgresql/data/postmaster.pid)";

pub async fn kill_postmaster(ctx: &Ctx, pod: &str) -> Result {
    ctx.exec_postgres(pod, &["bash", "-c", KILL_POSTMASTER])
        .await
        .map(|_| ())
}

/// Waits until `pod` runs as a replica again (recovery mode) and is Ready.
pub async fn rejoined(ctx: &Ctx, pod: &str) -> Result {
    until(
        format!("{pod} back as a replica"),
        ctx.timeout(),
        || async {
            let recovering = pod_sql(ctx, pod, "SELECT pg_is_in_recovery()").await;
            let state = ctx.pod_state(pod).await?;
            Ok(match recovering {
                Ok(r) if r == "t" && state.ready => Check::Done(()),
                Ok(r) => Check::Pending(format!("pg_is_in_recovery={r}, {state}")),
                Err(e) => Check::Pending(format!("{e}; {state}")),
            })
        },
    )
    .await
}

/// A failover seen from the writer's side: who was promoted and when the status said so, the
/// writer's acknowledgements and its longest gap around the fault.
pub struct Promotion {
    pub pod: String,
    pub at: Instant,
    pub acks: Vec<Ack>,
    pub gap: Duration,
}

/// After a fault at `fault` that costs `old` the primary role: waits until another instance of
/// `cluster` is promoted, then checks the writes as [`check_acks`] does.
pub async fn await_promotion(
    ctx: &Ctx,
    cluster: &str,
    old: &str,
    writer: Writer,
    fault: Instant,
) -> Result<Promotion> {
    let pod = promoted_other_than(ctx, cluster, old).await?;
    let at = Instant::now();
    let (acks, gap) = check_acks(ctx, cluster, writer, fault, at).await?;
    Ok(Promotion { pod, at, acks, gap })
}

/// Waits until row `n` of the writer's table is replayed on `replica`.
pub async fn replayed(ctx: &Ctx, replica: &str, n: i64) -> Result {
    until(format!("row {n} on {replica}"), ctx.timeout(), || async {
        let count = row_count(ctx, replica, n).await?;
        Ok(Check::when(count == "1", format!("count {count}")))
    })
    .await
}

/// Waits until another pod than `old` is the primary in the cluster's status; its name.
pub async fn promoted_other_than(ctx: &Ctx, cluster: &str, old: &str) -> Result<String> {
    until("another instance promoted", ctx.timeout(), || async {
        let now = current_primary(ctx, cluster).await?.unwrap_or_default();
        Ok(if now != old && !now.is_empty() {
            Check::Done(now)
        } else {
            Check::Pending(format!("primary {now}"))
        })
    })
    .await
}

/// The address of `pod`'s instance manager, as the operator reaches it.
async fn manager_address(ctx: &Ctx, pod: &str) -> Result<InstanceAddress> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let pod = pods.get(pod).await?;
    let name = pod.name_any();
    let cluster = pod
        .labels()
        .get(CLUSTER_LABEL)
        .context(format!("pod {name} names no cluster"))?
        .clone();
    let pg = ctx.postgresql_in(&ctx.ns, &cluster).await?;
    let cluster = tusk::resources::Cluster::new(&pg)?;
    instance_address(&cluster, &(&pod).into()).context(format!("pod {name} has no IP"))
}

/// What the instance manager of `pod` reports on `/status` (read from the host, which reaches
/// the pod network on the e2e node).
/// Over TLS verified against the cluster's CA, with its status token, as the operator reads it.
pub async fn instance_status(ctx: &Ctx, pod: &str) -> Result<InstanceStatus> {
    InstanceReader::new(ctx.client.clone(), STATUS_PORT)
        .report(&manager_address(ctx, pod).await?)
        .await
        .context(format!("{pod}'s /status did not answer"))
}

/// Asks `pod`'s manager for a continuity check now, as the operator does after a base backup.
pub async fn ask_archive_check(ctx: &Ctx, pod: &str) -> Result {
    let asked = InstanceReader::new(ctx.client.clone(), STATUS_PORT)
        .ask_archive_check(&manager_address(ctx, pod).await?)
        .await;
    ensure!(
        asked,
        "{pod}'s manager did not take the request for a check"
    );
    Ok(())
}

/// Waits until `pod` is a replica by its own manager's account, on the timeline of `primary`,
/// and streams from it (`pg_stat_replication` on the primary says so).
pub async fn rejoined_streaming(ctx: &Ctx, pod: &str, primary: &str) -> Result {
    let sql = format!("SELECT state FROM pg_stat_replication WHERE application_name = '{pod}'");
    until(
        format!("{pod} streaming from {primary} on its timeline"),
        ctx.timeout(),
        || async {
            let mine = instance_status(ctx, pod).await?;
            let theirs = instance_status(ctx, primary).await?;
            let state = pod_sql(ctx, primary, &sql).await?;
            // Its own report too: the operator admits a switchover target by it.
            let done = mine.role == Role::Replica
                && mine.timeline.is_some()
                && mine.timeline == theirs.timeline
                && mine.wal_receiver.as_deref() == Some("streaming")
                && state == "streaming";
            Ok(Check::when(
                done,
                format!(
                    "{pod}: {} on timeline {:?}; {primary}: {} on timeline {:?}; \
                     pg_stat_replication: {state:?}",
                    mine.role, mine.timeline, theirs.role, theirs.timeline
                ),
            ))
        },
    )
    .await
}

/// `leaseTransitions` of the cluster's primary Lease.
pub async fn lease_transitions(ctx: &Ctx, cluster: &str) -> Result<i32> {
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let lease = leases.get(&format!("{cluster}-primary")).await?;
    Ok(lease
        .spec
        .and_then(|s| s.lease_transitions)
        .unwrap_or_default())
}

/// The holder of the cluster's primary Lease and when it acquired it.
pub async fn lease_acquired(ctx: &Ctx, cluster: &str) -> Result<(String, SystemTime)> {
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let spec = leases
        .get(&format!("{cluster}-primary"))
        .await?
        .spec
        .unwrap_or_default();
    let acquired = spec.acquire_time.context("the Lease has no acquireTime")?;
    Ok((
        spec.holder_identity.unwrap_or_default(),
        SystemTime::from(acquired.0),
    ))
}

/// The cluster's FailedOver Events: who reported each (the operator's pod name), once per
/// occurrence.
pub async fn failed_over_events(ctx: &Ctx, cluster: &str) -> Result<Vec<String>> {
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let list = events.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedOver"))
        .filter(|e| e.involved_object.name.as_deref() == Some(cluster))
        .flat_map(|e| {
            let times = usize::try_from(e.count.unwrap_or(1).max(1)).unwrap_or(1);
            let reporter = e.reporting_instance.clone().unwrap_or_default();
            std::iter::repeat_n(reporter, times)
        })
        .collect())
}

/// The names of the operator's pods (deploy/'s Deployment).
pub async fn operator_pods(ctx: &Ctx) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), OPERATOR_NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels(OPERATOR_SELECTOR))
        .await?;
    Ok(list.items.iter().map(ResourceExt::name_any).collect())
}
