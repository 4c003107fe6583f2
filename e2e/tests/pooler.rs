//! The pooler on real pods (docs/src/cluster/pooler.md): a writer on one session through
//! `<name>-pooler-rw` in transaction mode, through planned switchovers (the pooler pauses, so
//! no transaction may fail) and crashes of the primary's postmaster (counted and printed).
//! Every acknowledged row must be on the primary at the end; the pauses are printed, never
//! asserted. `TUSK_POOLER_SWITCHOVERS`, `TUSK_POOLER_CRASHES` and `TUSK_POOLER_FAILOVERS`
//! (the primary frozen until a replica is promoted) set how many (3, 2 and 1 in the suite; the
//! benchmark's figures are 20, 5 and 5). Then pgbench select-only, through the pooler and
//! straight to the primary, when the host has pgbench (printed as a ratio).

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use tusk_e2e::faults::{kill_postmaster, promoted_other_than, rejoined, rejoined_streaming};
use tusk_e2e::replication::{
    Writer, current_primary, lost, pooler_session, rows, synchronous, write_gap,
};
use tusk_e2e::switchover::{request_switchover, switched_over};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};

const NAME: &str = "pool";

fn count(var: &str, default: usize) -> Result<usize> {
    match std::env::var(var) {
        Ok(n) => n.parse().context(var.to_owned()),
        Err(_) => Ok(default),
    }
}

/// Waits until pooler Deployment `deployment` has a pod ready.
async fn pooler_ready(ctx: &Ctx, deployment: &str) -> Result {
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    until(format!("{deployment} ready"), ctx.timeout(), || async {
        let found = deployments.get_opt(deployment).await?;
        let status = found.as_ref().and_then(|d| d.status.clone());
        let ready = status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
        Ok(match ready >= 1 {
            true => Check::Done(()),
            false => Check::Pending(format!("{status:?}")),
        })
    })
    .await
}

/// `readOnly: true`: a session through `<name>-pooler-ro` lands on a replica (in recovery),
/// with the app's own role and password, TLS verified by the pooler's name.
async fn read_only_pooler_reads_a_replica(ctx: &Ctx) -> Result<String> {
    pooler_ready(ctx, &format!("{NAME}-pooler-ro")).await?;
    let service = format!("{NAME}-pooler-ro");
    let session = pooler_session(ctx, NAME, &service).await?;
    let row = session
        .query_one("SELECT pg_is_in_recovery(), count(*) FROM writes", &[])
        .await?;
    let (recovering, rows): (bool, i64) = (row.get(0), row.get(1));
    ensure!(recovering, "{service} reached the primary, not a replica");
    let refused = session.simple_query("CREATE TABLE nope (n int)").await;
    ensure!(refused.is_err(), "{service} accepted a write");
    Ok(format!(
        "{service}: a replica answered ({rows} rows of writes), a write refused"
    ))
}

/// Seconds, p50 / p99 / max.
fn spread(mut seconds: Vec<f64>) -> String {
    if seconds.is_empty() {
        return "none".to_owned();
    }
    seconds.sort_by(f64::total_cmp);
    let at = |q: f64| seconds[((seconds.len() as f64 - 1.0) * q).round() as usize];
    format!(
        "p50={:.2}s p99={:.2}s max={:.2}s",
        at(0.5),
        at(0.99),
        seconds[seconds.len() - 1]
    )
}

#[scenario]
async fn a_writer_through_the_pooler_sees_no_failed_transaction_at_a_switchover(
    ctx: Ctx,
) -> Result {
    ctx.require_real_pods()?;
    let switchovers = count("TUSK_POOLER_SWITCHOVERS", 3)?;
    let crashes = count("TUSK_POOLER_CRASHES", 2)?;
    let failovers = count("TUSK_POOLER_FAILOVERS", 1)?;
    let manifest = format!(
        "{}  pooler: {{instances: 1, poolMode: transaction, readOnly: true}}\n",
        synchronous(NAME, 3, "required")
    );
    ctx.apply(&manifest).await?;
    ctx.wait_ready(&[NAME]).await?;
    pooler_ready(&ctx, &format!("{NAME}-pooler")).await?;
    let writer = Writer::through_pooler(&ctx, NAME).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    say(format!(
        "  {}",
        read_only_pooler_reads_a_replica(&ctx).await?
    ));

    let mut pauses = Vec::new();
    let mut switch_failures = 0;
    for trial in 0..switchovers {
        let primary = current_primary(&ctx, NAME).await?.unwrap_or_default();
        let ordinal: u32 = primary.rsplit('-').next().unwrap_or("0").parse()?;
        let target = format!("{NAME}-{}", (ordinal + 1) % 3);
        // From a healthy cluster, as an operator of it would: every replica streams (the last
        // switchover's old primary has rejoined). A target that does not stream yet is
        // refused, and while the other replica still rejoins, the new primary's synchronous
        // commits would wait for it: the figure would be the rejoin's, not the switchover's.
        for replica in (0..3).map(|i| format!("{NAME}-{i}")) {
            if replica != primary {
                rejoined_streaming(&ctx, &replica, &primary).await?;
            }
        }
        let failed_before = writer.failures();
        let asked = Instant::now();
        request_switchover(&ctx, NAME, &target).await?;
        switched_over(&ctx, NAME, &target).await?;
        writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
        let pause = write_gap(&writer.acks(), asked).unwrap_or_default();
        let failed = writer.failures() - failed_before;
        switch_failures += failed;
        say(format!(
            "  switchover {}: {primary} -> {target}: longest wait {:.2}s, {failed} failed",
            trial + 1,
            pause.as_secs_f64()
        ));
        pauses.push(pause.as_secs_f64());
    }

    // The pooler's own account of them, as its metrics endpoint serves it.
    if switchovers > 0 {
        let metrics = pooler_metrics(&ctx).await?;
        let reroutes = tusk_e2e::metrics::sum(&metrics, "tusk_pooler_reroutes_total");
        let paused = tusk_e2e::metrics::sum(&metrics, "tusk_pooler_paused ");
        ensure!(
            reroutes >= switchovers as f64 && paused == 0.0,
            "the pooler counts {reroutes} reroutes after {switchovers} switchovers, paused={paused}"
        );
        let last = tusk_e2e::metrics::sum(&metrics, "tusk_pooler_last_pause_seconds");
        say(format!(
            "  the pooler's metrics: {reroutes} reroutes, last pause {last:.2}s, not paused"
        ));
    }

    let mut crash_failures = Vec::new();
    let mut crash_gaps = Vec::new();
    for trial in 0..crashes {
        let primary = current_primary(&ctx, NAME).await?.unwrap_or_default();
        let failed_before = writer.failures();
        let fault = Instant::now();
        kill_postmaster(&ctx, &primary).await?;
        rejoined_or_primary(&ctx, &primary).await?;
        writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
        let gap = write_gap(&writer.acks(), fault).unwrap_or_default();
        let failed = writer.failures() - failed_before;
        say(format!(
            "  crash {}: {primary}'s postmaster killed: gap {:.2}s, {failed} failed",
            trial + 1,
            gap.as_secs_f64()
        ));
        crash_failures.push(failed);
        crash_gaps.push(gap.as_secs_f64());
    }

    // Failovers: the primary frozen until the Lease expires and a replica is promoted, then
    // thawed (it comes back as a replica).
    let mut failover_failures = Vec::new();
    let mut failover_gaps = Vec::new();
    for trial in 0..failovers {
        let primary = current_primary(&ctx, NAME).await?.unwrap_or_default();
        let failed_before = writer.failures();
        let fault = Instant::now();
        ctx.platform.pod_freeze(&ctx.ns, &primary, true).await?;
        let promoted = promoted_other_than(&ctx, NAME, &primary).await;
        ctx.platform.pod_freeze(&ctx.ns, &primary, false).await?;
        let promoted = promoted?;
        writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
        rejoined(&ctx, &primary).await?;
        let gap = write_gap(&writer.acks(), fault).unwrap_or_default();
        let failed = writer.failures() - failed_before;
        say(format!(
            "  failover {}: {primary} frozen, {promoted} promoted: gap {:.2}s, {failed} failed",
            trial + 1,
            gap.as_secs_f64()
        ));
        failover_failures.push(failed);
        failover_gaps.push(gap.as_secs_f64());
    }

    let reasons = writer.failure_reasons();
    let acks = writer.stop();
    let present = rows(&ctx, NAME).await?;
    let missing = lost(&acks, &present);
    ensure!(
        missing.is_empty(),
        "{} acknowledged rows lost: {missing:?}",
        missing.len()
    );
    say(format!(
        "pooler, transaction mode: {switchovers} switchovers: {switch_failures} failed \
         transactions, client-visible wait {}; {crashes} postmaster crashes: {} failed \
         transactions in all, gap {}; {failovers} failovers (primary frozen): {} failed \
         transactions in all, gap {}; {} rows acknowledged, 0 lost",
        spread(pauses),
        crash_failures.iter().sum::<usize>(),
        spread(crash_gaps),
        failover_failures.iter().sum::<usize>(),
        spread(failover_gaps),
        acks.len()
    ));
    if !reasons.is_empty() {
        say(format!(
            "  why attempts failed (the first few): {reasons:?}"
        ));
    }
    ensure!(
        switch_failures == 0,
        "{switch_failures} transactions failed through the pooler at a planned switchover: {reasons:?}"
    );
    pgbench_ratio(&ctx).await
}

/// `/metrics` of the cluster's (one) pooler pod, over its pod IP.
async fn pooler_metrics(ctx: &Ctx) -> Result<String> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let selector = format!("tusk.dev/cluster={NAME},app.kubernetes.io/component=pooler");
    let listed = pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?;
    let ip = listed
        .items
        .iter()
        .find_map(|pod| pod.status.as_ref()?.pod_ip.clone())
        .context("no pooler pod with an IP")?;
    tusk_e2e::metrics::get((ip.as_str(), 9127), "/metrics").await
}

/// After a crash of its postmaster the primary restarts in place (or, if it took too long, a
/// replica was promoted): either way, wait until the cluster is Ready again.
async fn rejoined_or_primary(ctx: &Ctx, crashed: &str) -> Result {
    let now = current_primary(ctx, NAME).await?.unwrap_or_default();
    if now != crashed {
        rejoined(ctx, crashed).await?;
    }
    ctx.wait_ready(&[NAME]).await
}

/// pgbench select-only through the pooler and straight to the primary's pod, as the app
/// owner; printed as a ratio, never asserted. Skipped (said) without pgbench on the host.
async fn pgbench_ratio(ctx: &Ctx) -> Result {
    let Some(pgbench) = tusk_e2e::pgbench::find() else {
        say("pgbench: not on this host, the throughput ratio is not measured");
        return Ok(());
    };
    let seconds = count("TUSK_POOLER_PGBENCH_SECONDS", 10)?;
    let primary = current_primary(ctx, NAME).await?.unwrap_or_default();
    let direct = tusk_e2e::replication::pod_ip(ctx, &primary).await?;
    let direct_name = format!("{primary}.{NAME}-hl.{}.svc", ctx.ns);
    let pooled = tusk_e2e::replication::service_ip(ctx, &format!("{NAME}-pooler-rw")).await?;
    let pooled_name = format!("{NAME}-pooler-rw.{}.svc", ctx.ns);
    let bench = tusk_e2e::pgbench::Bench::new(ctx, NAME, &pgbench).await?;
    bench.init(&direct_name, &direct).await?;
    let straight = bench.select_only(&direct_name, &direct, seconds).await?;
    let through = bench.select_only(&pooled_name, &pooled, seconds).await?;
    say(format!(
        "pgbench select-only, 8 clients, {seconds}s: direct {straight:.0} tps, through the \
         pooler {through:.0} tps ({:.0}%)",
        100.0 * through / straight.max(1.0)
    ));
    Ok(())
}
