//! Replication on real pods (e2e/local/node-run.sh): a primary with streaming replicas, the
//! primary lost in two ways, and the invariants after each fault — every acknowledged row
//! present, no commit on an old timeline after the first on the new one, the former primary
//! back as a replica. The write gaps printed here are single runs; the benchmark repeats them.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use tusk_e2e::replication::{
    Writer, current_primary, forked, lost, pod_sql, replicated, rows, write_gap,
};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, fail, say, scenario, until};

/// Cluster `name` with three instances, Ready, and its writer running.
async fn three_with_writer(ctx: &Ctx, name: &str) -> Result<(String, Writer)> {
    ctx.apply(&replicated(name, 3)).await?;
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
async fn check_writes(
    ctx: &Ctx,
    name: &str,
    writer: Writer,
    fault: Instant,
    landed: Instant,
) -> Result<Duration> {
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
    write_gap(&acks, fault).context("no acknowledgement around the fault")
}

/// Waits until `pod` runs as a replica again (recovery mode) and is Ready.
async fn rejoined(ctx: &Ctx, pod: &str) -> Result {
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

/// Three instances: ordinal 0 primary, the others streaming from it through their slots, a
/// row written through `-rw` replayed on both replicas.
#[scenario]
async fn ha_replicas_stream_from_the_primary(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "ha").await?;
    let streaming = pod_sql(
        &ctx,
        &primary,
        "SELECT string_agg(application_name || ':' || state, ',' ORDER BY application_name) FROM pg_stat_replication",
    )
    .await?;
    ensure!(
        streaming == "ha-1:streaming,ha-2:streaming",
        "pg_stat_replication on {primary}: {streaming:?}"
    );
    let acks = writer.stop();
    let last = acks.last().map(|a| a.n).unwrap_or_default();
    for replica in ["ha-1", "ha-2"] {
        let sql = format!("SELECT count(*) FROM writes WHERE n = {last}");
        until(
            format!("row {last} on {replica}"),
            ctx.timeout(),
            || async {
                let count = pod_sql(&ctx, replica, &sql).await?;
                Ok(Check::when(count == "1", format!("count {count}")))
            },
        )
        .await?;
        let recovery = pod_sql(&ctx, replica, "SELECT pg_is_in_recovery()").await?;
        ensure!(recovery == "t", "{replica} is not a standby: {recovery}");
    }
    say(format!(
        "{primary} streams to ha-1 and ha-2; row {last} replayed on both"
    ));
    Ok(())
}

/// `kill -9` of the primary's postmaster: its instance manager, still holding a fresh Lease,
/// restarts it in place — no failover, no lost row.
#[scenario]
async fn ha_postmaster_killed_restarts_in_place(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "crash").await?;
    let fault = Instant::now();
    ctx.exec_postgres(
        &primary,
        &[
            "bash",
            "-c",
            "kill -9 $(head -1 /var/lib/postgresql/data/postmaster.pid)",
        ],
    )
    .await?;
    let gap = check_writes(&ctx, "crash", writer, fault, Instant::now()).await?;
    let after = current_primary(&ctx, "crash").await?.unwrap_or_default();
    ensure!(
        after == primary,
        "the primary moved to {after} after a restart in place"
    );
    say(format!(
        "postmaster of {primary} killed: write gap {:.2}s, 0 rows lost, still primary",
        gap.as_secs_f64()
    ));
    Ok(())
}

/// The primary's pod force-deleted (no grace): the StatefulSet recreates it at once, so on one
/// node its manager is back before the Lease expires and keeps the primary role (a restart,
/// not a failover: nothing to promote). Writes resume through `-rw`, nothing is lost.
#[scenario]
async fn ha_primary_pod_force_deleted(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "lost").await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let old = ctx.pod_state(&primary).await?;
    let fault = Instant::now();
    pods.delete(&primary, &DeleteParams::default().grace_period(0))
        .await?;
    ctx.wait_pod(&primary, "a new pod", |p| p.uid != old.uid)
        .await?;
    let gap = check_writes(&ctx, "lost", writer, fault, Instant::now()).await?;
    let now = current_primary(&ctx, "lost").await?.unwrap_or_default();
    say(format!(
        "{primary} force-deleted: primary now {now}; write gap {:.2}s; 0 rows lost",
        gap.as_secs_f64()
    ));
    Ok(())
}

/// The primary frozen (every process of its container stopped, as on a hung node): it cannot
/// renew its Lease, the operator waits the Lease out and promotes the most advanced replica,
/// writes resume through `-rw`. Thawed, the old primary finds it no longer holds the Lease,
/// fences, rewinds and rejoins as a replica.
#[scenario]
async fn ha_frozen_primary_fails_over(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "frozen").await?;
    let fault = Instant::now();
    ctx.platform.pod_freeze(&ctx.ns, &primary, true).await?;
    let promoted = until("another instance promoted", ctx.timeout(), || async {
        let now = current_primary(&ctx, "frozen").await?.unwrap_or_default();
        Ok(if now != primary && !now.is_empty() {
            Check::Done(now)
        } else {
            Check::Pending(format!("primary {now}"))
        })
    })
    .await;
    let promoted_at = Instant::now();
    let checked = match promoted {
        Ok(promoted) => check_writes(&ctx, "frozen", writer, fault, promoted_at)
            .await
            .map(|gap| (promoted, gap)),
        Err(e) => Err(e),
    };
    // Thawed whatever happened: a frozen container would also hold up the namespace's deletion.
    ctx.platform.pod_freeze(&ctx.ns, &primary, false).await?;
    let (promoted, gap) = checked?;
    rejoined(&ctx, &primary).await?;
    say(format!(
        "{primary} frozen: {promoted} promoted {:.1}s after the freeze; write gap {:.2}s; 0 rows \
         lost; {primary} thawed, fenced and rejoined as a replica",
        promoted_at.duration_since(fault).as_secs_f64(),
        gap.as_secs_f64()
    ));
    Ok(())
}
