//! The failover benchmark (scripts/bench-failover.sh): repeated faults (the postmaster killed,
//! a planned switchover, the pod force-deleted and recreated, the primary frozen, and the states
//! faults leave behind: the primary's volume deleted with its pod, a replica promoted by hand,
//! the primary's manager frozen alone, a replica back from a scale-down without its WAL) on one
//! three-instance cluster on real pods, each measured by the writer's gap between the last
//! acknowledged row before the fault and the first after it. Prints the figures; asserts only
//! the invariants (no acknowledged row lost, no forked timeline), never a speed. Skipped unless
//! TUSK_FAILOVER_TRIALS is set; TUSK_FAILOVER_DURABILITY picks the replication: `required`
//! (the default: synchronous `ANY 1`, where no acknowledged row may be lost), `preferred` or
//! `async`.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use tusk_e2e::faults::{kill_postmaster, promoted_other_than, rejoined_streaming};
use tusk_e2e::replication::{
    Writer, current_primary, forked, lost, pod_sql, replicated, rows, synchronous, write_gap,
};
use tusk_e2e::switchover::{request_switchover, switched_over};
use tusk_e2e::{Check, Context, Ctx, Level, Result, absent, ensure, fail, say, scenario, until};

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

/// Every series, in the order they run.
const SERIES: [&str; 8] = [
    "kill",
    "switchover",
    "delete",
    "freeze",
    "wipe",
    "rogue",
    "manager",
    "regrow",
];

/// The series `TUSK_FAILOVER_SERIES` names (comma-separated, of [`SERIES`]), or None for all.
fn series() -> Result<Option<Vec<String>>> {
    let Ok(list) = std::env::var("TUSK_FAILOVER_SERIES") else {
        return Ok(None);
    };
    let names: Vec<String> = list.split(',').map(|s| s.trim().to_owned()).collect();
    for name in &names {
        ensure!(
            SERIES.contains(&name.as_str()),
            "TUSK_FAILOVER_SERIES: {name:?} is none of {}",
            SERIES.join(", ")
        );
    }
    Ok(Some(names))
}

/// `TUSK_FAILOVER_BURST`: how many new clusters are applied at once before each `freeze`
/// trial (0, the default: none), so that the failover is measured while the operator's queue
/// holds their first reconciles.
fn burst_size() -> Result<usize> {
    match std::env::var("TUSK_FAILOVER_BURST") {
        Ok(n) => n.parse().context("TUSK_FAILOVER_BURST"),
        Err(_) => Ok(0),
    }
}

/// Applies `n` one-instance clusters into a fresh namespace, 16 requests at a time. Their pods
/// ask for more CPU than the node has and stay Pending: the operator does a new cluster's whole
/// work (Lease, credentials, every child) and nothing runs.
async fn apply_burst(ctx: &Ctx, n: usize) -> Result<String> {
    let ns = ctx.extra_namespace().await?;
    let started = Instant::now();
    let applies = (0..n).map(|i| {
        let ns = ns.clone();
        async move {
            let yaml = format!(
                "apiVersion: tusk.dev/v1alpha1\nkind: PostgreSQL\nmetadata: {{name: burst-{i}}}\n\
                 spec:\n  version: \"15\"\n  storage: {{size: 1Gi}}\n  resources: {{requests: {{cpu: \"500\"}}}}\n"
            );
            ctx.apply_in(&ns, &yaml).await
        }
    });
    futures::stream::iter(applies)
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    say(format!(
        "  burst: {n} clusters applied into {ns} in {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    Ok(ns)
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
    // A benchmark first: the suite's real-pod runs leave it out by that level.
    let Ok(trials) = std::env::var("TUSK_FAILOVER_TRIALS") else {
        return Err(absent(
            Level::Benchmark,
            "set TUSK_FAILOVER_TRIALS (scripts/bench-failover.sh)",
        ));
    };
    ctx.require_real_pods()?;
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
                kill_postmaster(&ctx, primary).await
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
    let burst = burst_size()?;
    for _ in 0..runs(
        "freeze",
        "the primary frozen (failover after the Lease expires, then thawed)",
    ) {
        let bursting = match burst {
            0 => None,
            n => Some(apply_burst(&ctx, n).await?),
        };
        frozen.push(
            trial(&ctx, async |primary: &str| {
                ctx.platform.pod_freeze(&ctx.ns, primary, true).await?;
                let promoted = promoted_other_than(&ctx, NAME, primary).await;
                ctx.platform.pod_freeze(&ctx.ns, primary, false).await?;
                promoted.map(|_| ())
            })
            .await?,
        );
        if let Some(ns) = bursting {
            let made = Api::<StatefulSet>::namespaced(ctx.client.clone(), &ns)
                .list(&Default::default())
                .await?
                .items
                .len();
            say(format!(
                "  when writes resumed, {made} of the {burst} new clusters had their StatefulSet"
            ));
        }
    }
    // The states faults leave behind (issue 25). The primary's volume deleted with its pod: it
    // comes back, still the holder, on an empty claim; it never runs initdb, a replica is
    // promoted and the rebuilt pod clones it — measured until it streams again.
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &ctx.ns);
    let mut wiped = Vec::new();
    for _ in 0..runs("wipe", "the primary's claim and pod deleted") {
        wiped.push(
            trial(&ctx, async |primary: &str| {
                let claim = format!("data-{primary}");
                claims.delete(&claim, &DeleteParams::default()).await?;
                pods.delete(primary, &DeleteParams::default().grace_period(0))
                    .await?;
                let promoted = promoted_other_than(&ctx, NAME, primary).await?;
                rejoined_streaming(&ctx, primary, &promoted).await
            })
            .await?,
        );
    }
    // A replica promoted by hand: fenced by its manager, rewound back into a replica; the
    // primary never stops (the gap is the writer's ordinary one).
    let mut rogues = Vec::new();
    for _ in 0..runs("rogue", "a replica promoted behind the managers' back") {
        rogues.push(
            trial(&ctx, async |primary: &str| {
                let ordinal: u32 = primary.rsplit('-').next().unwrap_or("0").parse()?;
                let rogue = format!("{NAME}-{}", (ordinal + 1) % 3);
                // Without waiting: the manager's fence may end this very session (the 9th trial
                // of a 25-trial run failed on "terminating connection due to immediate shutdown").
                pod_sql(&ctx, &rogue, "SELECT pg_promote(wait => false)").await?;
                rejoined_streaming(&ctx, &rogue, primary).await
            })
            .await?,
        );
    }
    // The primary's instance manager alone stopped: its watchdog fences the postmaster before
    // the Lease expires, a replica is promoted; the manager continued, the old primary rejoins.
    let mut managers = Vec::new();
    for _ in 0..runs("manager", "the primary's instance manager frozen alone") {
        managers.push(
            trial(&ctx, async |primary: &str| {
                ctx.platform
                    .pod_freeze_manager(&ctx.ns, primary, true)
                    .await?;
                let promoted = promoted_other_than(&ctx, NAME, primary).await;
                ctx.platform
                    .pod_freeze_manager(&ctx.ns, primary, false)
                    .await?;
                let promoted = promoted?;
                rejoined_streaming(&ctx, primary, &promoted).await
            })
            .await?,
        );
    }
    // Scale 3 → 2, WAL switched past the removed replica's claim, scale → 3: it returns without
    // the WAL it needs and is cloned again.
    let mut regrown = Vec::new();
    for _ in 0..runs(
        "regrow",
        "scale 3→2, WAL past the replica's claim, scale →3",
    ) {
        regrown.push(
            trial(&ctx, async |_: &str| {
                let instances = |n: u8| serde_json::json!({"spec": {"instances": n}});
                let ordinals: Vec<String> = (0..3).map(|o| format!("{NAME}-{o}")).collect();
                // The highest ordinal goes (a primary there is switched over first).
                ctx.merge_patch_postgresql_in(&ctx.ns, NAME, instances(2))
                    .await?;
                let removed = &ordinals[2];
                until(format!("{removed} removed"), ctx.timeout(), || async {
                    Ok(Check::when(
                        pods.get_opt(removed).await?.is_none(),
                        format!("{removed} remains"),
                    ))
                })
                .await?;
                let now = current_primary(&ctx, NAME).await?.unwrap_or_default();
                let switch = "CHECKPOINT; SELECT pg_switch_wal(); CHECKPOINT; \
                              SELECT pg_switch_wal(); CHECKPOINT";
                for _ in 0..4 {
                    pod_sql(&ctx, &now, switch).await?;
                }
                ctx.merge_patch_postgresql_in(&ctx.ns, NAME, instances(3))
                    .await?;
                ctx.wait_ready(&[NAME]).await?;
                rejoined_streaming(&ctx, removed, &now).await
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
        ("primary's claim and pod deleted", &wiped),
        ("replica promoted by hand", &rogues),
        ("primary's manager frozen alone", &managers),
        ("scale 3→2→3 without the WAL", &regrown),
    ];
    for (fault, trials) in series.iter().filter(|(_, trials)| !trials.is_empty()) {
        say(format!("| {fault} | {} |", summary(trials)));
    }
    let all: Vec<(Duration, usize)> = series.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    say(format!("all faults: {}", summary(&all)));
    Ok(())
}
