//! The failover benchmark (scripts/bench-failover.sh): repeated faults (the postmaster killed,
//! a planned switchover, the pod force-deleted and recreated, the primary frozen) on one
//! three-instance cluster on real pods, each measured by the writer's gap between the last
//! acknowledged row before the fault and the first after it. Prints the figures; asserts only
//! the invariants (no acknowledged row lost, no forked timeline), never a speed. Skipped unless
//! TUSK_FAILOVER_TRIALS is set; TUSK_FAILOVER_DURABILITY picks the replication: `required`
//! (the default: synchronous `ANY 1`, where no acknowledged row may be lost), `preferred` or
//! `async`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use tusk_e2e::faults::promoted_other_than;
use tusk_e2e::replication::{
    Writer, current_primary, forked, lost, pod_sql, replicated, rows, synchronous, write_gap,
};
use tusk_e2e::switchover::{request_switchover, switched_over};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, fail, say, scenario, skip, until};

const NAME: &str = "bench";

/// The gaps' p50, p99 and maximum in seconds (with 20 trials p99 is the maximum), and the
/// acknowledged rows the trials checked.
fn summary(trials: &[(Duration, usize)]) -> String {
    let mut sorted: Vec<f64> = trials.iter().map(|(gap, _)| gap.as_secs_f64()).collect();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
    let rows: usize = trials.iter().map(|(_, rows)| rows).sum();
    format!(
        "n={} p50={:.2}s p99={:.2}s max={:.2}s | {rows} rows, 0 lost",
        sorted.len(),
        at(0.5),
        at(0.99),
        sorted.last().copied().unwrap_or_default()
    )
}

/// Waits until every instance is Ready again and `pod` is a replica or the primary it should be.
async fn settled(ctx: &Ctx) -> Result<String> {
    ctx.wait_ready(&[NAME]).await?;
    until("a primary in status", ctx.timeout(), || async {
        let primary = current_primary(ctx, NAME).await?.unwrap_or_default();
        let recovering = pod_sql(ctx, &primary, "SELECT pg_is_in_recovery()").await;
        Ok(match recovering {
            Ok(r) if r == "f" => Check::Done(primary),
            other => Check::Pending(format!("{primary}: {other:?}")),
        })
    })
    .await
}

/// One fault, measured: the write gap and the rows acknowledged, after checking that no
/// acknowledged row was lost.
async fn trial(ctx: &Ctx, fault: impl AsyncFnOnce(&str) -> Result) -> Result<(Duration, usize)> {
    let primary = settled(ctx).await?;
    let writer = Writer::start(ctx, NAME).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let at = Instant::now();
    fault(&primary).await?;
    // The fault has surely acted now (the kill ran, or another instance was promoted).
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let acks = writer.stop();
    let missing = lost(&acks, &rows(ctx, NAME).await?);
    ensure!(missing.is_empty(), "acknowledged rows lost: {missing:?}");
    ensure!(
        forked(&acks).is_none(),
        "a commit on an old timeline after a newer one"
    );
    let gap = write_gap(&acks, at).unwrap_or_default();
    say(format!(
        "  {primary}: gap {:.2}s, {} rows acknowledged",
        gap.as_secs_f64(),
        acks.len()
    ));
    Ok((gap, acks.len()))
}

/// The series `TUSK_FAILOVER_SERIES` names (comma-separated: kill, switchover, delete, freeze),
/// or None for all four.
fn series() -> Result<Option<Vec<String>>> {
    let Ok(list) = std::env::var("TUSK_FAILOVER_SERIES") else {
        return Ok(None);
    };
    let names: Vec<String> = list.split(',').map(|s| s.trim().to_owned()).collect();
    for name in &names {
        ensure!(
            ["kill", "switchover", "delete", "freeze"].contains(&name.as_str()),
            "TUSK_FAILOVER_SERIES: {name:?} is none of kill, switchover, delete, freeze"
        );
    }
    Ok(Some(names))
}

/// The cluster's manifest for `TUSK_FAILOVER_DURABILITY`.
fn manifest() -> Result<String> {
    let durability =
        std::env::var("TUSK_FAILOVER_DURABILITY").unwrap_or_else(|_| "required".to_owned());
    match durability.as_str() {
        "async" => Ok(replicated(NAME, 3)),
        "required" | "preferred" => Ok(synchronous(NAME, 3, &durability)),
        other => fail!("TUSK_FAILOVER_DURABILITY={other}: expected required, preferred or async"),
    }
}

#[scenario]
async fn ha_failover_benchmark(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let Ok(trials) = std::env::var("TUSK_FAILOVER_TRIALS") else {
        return Err(skip(
            "a benchmark: set TUSK_FAILOVER_TRIALS (scripts/bench-failover.sh)",
        ));
    };
    let trials: usize = trials.parse().context("TUSK_FAILOVER_TRIALS")?;
    let only = series()?;
    let runs = |series: &str, what: &str| {
        if only
            .as_ref()
            .is_none_or(|only| only.iter().any(|s| s == series))
        {
            say(format!("{series}: {what}:"));
            trials
        } else {
            0
        }
    };
    let manifest = manifest()?;
    say(format!("cluster:\n{manifest}"));
    ctx.apply(&manifest).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);

    let mut killed = Vec::new();
    for _ in 0..runs(
        "kill",
        "the primary's postmaster killed (restarted in place)",
    ) {
        killed.push(
            trial(&ctx, async |primary: &str| {
                let kill = "kill -9 $(head -1 /var/lib/postgresql/data/postmaster.pid)";
                ctx.exec_postgres(primary, &["bash", "-c", kill]).await?;
                Ok(())
            })
            .await?,
        );
    }
    let mut switched = Vec::new();
    for _ in 0..runs("switchover", "a planned switchover to the next ordinal") {
        switched.push(
            trial(&ctx, async |primary: &str| {
                let ordinal: u32 = primary.rsplit('-').next().unwrap_or("0").parse()?;
                let target = format!("{NAME}-{}", (ordinal + 1) % 3);
                request_switchover(&ctx, NAME, &target).await?;
                switched_over(&ctx, NAME, &target).await.map(|_| ())
            })
            .await?,
        );
    }
    // On one node the StatefulSet's new pod is back before the Lease expires and keeps the
    // primary role (e2e/tests/replication.rs, ha_primary_pod_force_deleted): measured until the
    // new pod is Ready and writes resume, whoever is primary then. Not just until it exists:
    // the old pod's postmaster can still acknowledge writes until the kubelet has killed it,
    // so the outage could have fallen after the trial.
    let mut deleted = Vec::new();
    for _ in 0..runs(
        "delete",
        "the primary's pod force-deleted (recreated at once)",
    ) {
        deleted.push(
            trial(&ctx, async |primary: &str| {
                let old = ctx.pod_state(primary).await?;
                pods.delete(primary, &DeleteParams::default().grace_period(0))
                    .await?;
                ctx.wait_pod(primary, "a new pod, Ready", |p| p.uid != old.uid && p.ready)
                    .await
                    .map(|_| ())
            })
            .await?,
        );
    }
    let mut frozen = Vec::new();
    for _ in 0..runs(
        "freeze",
        "the primary frozen (failover after the Lease expires, then thawed)",
    ) {
        frozen.push(
            trial(&ctx, async |primary: &str| {
                ctx.platform.pod_freeze(&ctx.ns, primary, true).await?;
                let promoted = promoted_other_than(&ctx, NAME, primary).await;
                ctx.platform.pod_freeze(&ctx.ns, primary, false).await?;
                promoted.map(|_| ())
            })
            .await?,
        );
    }
    say("| fault | write gap | acknowledged rows checked |");
    say("|---|---|---|");
    let series = [
        ("kill -9 postmaster", &killed),
        ("planned switchover", &switched),
        ("primary pod force-deleted", &deleted),
        ("primary frozen", &frozen),
    ];
    for (fault, trials) in series.iter().filter(|(_, trials)| !trials.is_empty()) {
        say(format!("| {fault} | {} |", summary(trials)));
    }
    let all: Vec<(Duration, usize)> = series.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    say(format!("all faults: {}", summary(&all)));
    Ok(())
}
