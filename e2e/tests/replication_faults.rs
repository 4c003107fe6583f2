//! The rest of the fault list on real pods (e2e/local/node-run.sh), beyond replication.rs: the
//! whole instance manager killed, the primary cut off from the API server and (separately)
//! from its peers, the operator killed in the middle of a failover, scaling 3 → 1 → 3. A
//! writer runs through `-rw` throughout; after every fault every acknowledged row is present
//! and no commit on a timeline follows the first on a newer one. Each prints one line with its numbers (single runs, not benchmarks).

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tusk::resources::LEASE_DURATION_SECONDS as LEASE_SECONDS;
use tusk_e2e::faults::{
    Promotion, await_promotion, check_acks, failed_over_events, lease_acquired, lease_transitions,
    operator_pods, rejoined, rejoined_streaming, replayed, started_with_writer, three_with_writer,
};
use tusk_e2e::invariants::{
    acked_after, first_on_new_timeline, instant_of, longest_gap_within, split_brain,
};
use tusk_e2e::replication::{
    Writer, current_primary, last_failover, lost, pod_sql, row_count, rows, synchronous,
};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};

/// `kill -9` of the primary's instance manager, PID 1 of its container, so the kernel takes
/// the postmaster with it: the kubelet restarts the container, and its manager, finding itself
/// still the holder of a fresh Lease, starts as primary again (or, had the Lease run out, a
/// replica would have been promoted). Nothing acknowledged is lost either way.
#[scenario]
async fn ha_instance_manager_killed(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "manager").await?;
    let restarts = ctx.pod_state(&primary).await?.restarts();
    let fault = Instant::now();
    ctx.platform.pod_kill(&ctx.ns, &primary).await?;
    ctx.wait_pod(&primary, "its container restarted", |p| {
        p.restarts() > restarts
    })
    .await?;
    let (acks, gap) = check_acks(&ctx, "manager", writer, fault, Instant::now()).await?;
    let now = current_primary(&ctx, "manager").await?.unwrap_or_default();
    let outcome = if now == primary {
        "same pod primary again".to_owned()
    } else {
        rejoined(&ctx, &primary).await?;
        format!("failover to {now}, {primary} rejoined as a replica")
    };
    say(format!(
        "instance manager of {primary} killed (SIGKILL to the container's PID 1): {outcome}; \
         write gap {:.2}s; {} rows acknowledged, 0 lost",
        gap.as_secs_f64(),
        acks.len()
    ));
    Ok(())
}

/// The primary cut off from the API server (its packets to it dropped, peers and clients still
/// reachable): it cannot renew its Lease, fences itself (immediate stop) before the renew
/// deadline, the operator hands the Lease to a replica once it went unchanged for its
/// duration. A second writer pinned to the old primary's pod IP measures the goal: commits the
/// isolated primary accepted after the promotion — 0. Healed, the old primary rejoins as a
/// streaming replica on the new timeline. `required` synchronous replication: "no row it
/// acknowledged before it fenced is lost" is that mode's promise; with asynchronous replication
/// a commit acknowledged as the fence struck may not have reached a replica (seen once in 2026-12,
/// the documented loss of an asynchronous failover).
#[scenario]
async fn ha_primary_cut_from_api_server_fences(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let manifest = synchronous("cut", 3, "required");
    let (primary, writer) = started_with_writer(&ctx, "cut", &manifest).await?;
    let pinned = Writer::pinned(&ctx, "cut", &primary).await?;
    pinned.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let fault = Instant::now();
    ctx.platform
        .pod_cut_from_api_server(&ctx.ns, &primary, true)
        .await?;
    let promotion = await_promotion(&ctx, "cut", &primary, writer, fault).await;
    // Healed whatever happened: the partition dies with the pod, but the next check needs it.
    ctx.platform
        .pod_cut_from_api_server(&ctx.ns, &primary, false)
        .await?;
    let Promotion {
        pod: promoted,
        acks,
        gap,
        ..
    } = promotion?;
    let reading = (Instant::now(), SystemTime::now());
    ensure!(
        last_failover(&ctx, "cut")
            .await?
            .is_some_and(|f| f.from == primary && f.to == promoted),
        "status.lastFailover does not record {primary} → {promoted}"
    );
    // The Lease changed hands then (its acquireTime, to the microsecond): the earliest the new
    // primary could accept a write.
    let (holder, acquired) = lease_acquired(&ctx, "cut").await?;
    ensure!(
        holder == promoted,
        "the Lease is held by {holder}, not {promoted}"
    );
    let handed_over = instant_of(acquired, reading);
    rejoined_streaming(&ctx, &primary, &promoted).await?;
    // Only now: the pinned writer kept trying the old primary all along, through the heal.
    let isolated = pinned.stop();
    let late = acked_after(&isolated, handed_over);
    ensure!(
        late.is_empty(),
        "the isolated primary accepted {} commits after the Lease went to {promoted}: {:?}",
        late.len(),
        late.iter().map(|a| a.n).collect::<Vec<_>>()
    );
    if let Some((newer, older)) = split_brain(&[&acks, &isolated]) {
        tusk_e2e::fail!(
            "two primaries: row {} on timeline {} acknowledged after row {} on {}",
            older.n,
            older.timeline,
            newer.n,
            newer.timeline
        );
    }
    let missing = lost(&isolated, &rows(&ctx, "cut").await?);
    ensure!(
        missing.is_empty(),
        "rows acknowledged by {primary} before it fenced are lost: {missing:?}"
    );
    let last_isolated = isolated.last().map(|a| a.at).unwrap_or(fault);
    let first_new = first_on_new_timeline(&acks)
        .map(|a| a.at)
        .unwrap_or(handed_over);
    let after = |at: Instant| at.saturating_duration_since(fault).as_secs_f64();
    say(format!(
        "{primary} cut from the API server: its last commit {:.1}s after the cut, Lease to \
         {promoted} at {:.1}s, first commit there at {:.1}s; isolated primary commits after the \
         promotion: {}; write gap {:.2}s; 0 rows lost; {primary} healed and streaming again",
        after(last_isolated),
        after(handed_over),
        after(first_new),
        late.len(),
        gap.as_secs_f64()
    ));
    Ok(())
}

/// The primary cut off from its peers only (the API server and clients still reach it): it
/// keeps renewing its Lease, so it stays the primary — replicas that lost sight of it are no
/// reason to demote a healthy primary — while the replicas fall behind. Healed, they stream
/// again and replay every row written meanwhile.
#[scenario]
async fn ha_primary_cut_from_peers_keeps_serving(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "peers").await?;
    let transitions = lease_transitions(&ctx, "peers").await?;
    let replicas = ["peers-1", "peers-2"];
    let fault = Instant::now();
    ctx.platform
        .pod_cut_from_pods(&ctx.ns, &primary, &replicas, true)
        .await?;
    // Writes acknowledged for longer than the Lease lasts plus the time to notice a lost
    // primary: had the cut cost the primary its Lease, it would have fenced by then.
    let window = Duration::from_secs(LEASE_SECONDS.unsigned_abs().into()) * 2;
    let held = writer.wait_ack_after(fault + window, ctx.timeout()).await;
    let stale = match &held {
        Ok(last) => {
            let mut counts = Vec::new();
            for replica in replicas {
                counts.push(row_count(&ctx, replica, last.n).await?);
            }
            Some(counts)
        }
        Err(_) => None,
    };
    ctx.platform
        .pod_cut_from_pods(&ctx.ns, &primary, &replicas, false)
        .await?;
    let last = held?;
    ensure!(
        stale.is_some_and(|c| c.iter().all(|c| c == "0")),
        "row {} reached a replica through the cut",
        last.n
    );
    let healed = Instant::now();
    for replica in replicas {
        rejoined_streaming(&ctx, replica, &primary).await?;
        replayed(&ctx, replica, last.n).await?;
    }
    let caught_up = Instant::now();
    let (acks, gap) = check_acks(&ctx, "peers", writer, fault, caught_up).await?;
    let now = current_primary(&ctx, "peers").await?.unwrap_or_default();
    let after = lease_transitions(&ctx, "peers").await?;
    ensure!(
        now == primary && after == transitions,
        "a failover to {now} (Lease transitions {transitions} → {after}) though {primary} renewed"
    );
    say(format!(
        "{primary} cut from its peers for {:.1}s: still primary, no Lease transition; write \
         gap {:.2}s; {} rows acknowledged, 0 lost; replicas caught up {:.1}s after the heal",
        healed.duration_since(fault).as_secs_f64(),
        gap.as_secs_f64(),
        acks.len(),
        caught_up.duration_since(healed).as_secs_f64()
    ));
    Ok(())
}

/// The operator killed (its pod force-deleted) while it waits out the Lease of a frozen
/// primary: the Deployment's next operator finds the Lease still unrenewed, waits its full
/// duration on its own clock, and fails over — exactly once: one Lease transition, one
/// FailedOver Event, `status.lastFailover` naming the old and new primary.
#[scenario]
async fn ha_operator_killed_mid_failover(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "restart").await?;
    let transitions = lease_transitions(&ctx, "restart").await?;
    let fault = Instant::now();
    ctx.platform.pod_freeze(&ctx.ns, &primary, true).await?;
    let failover = async {
        // The operator starts waiting out the Lease when the holder's pod turns unready.
        ctx.wait_pod(&primary, "unready", |p| !p.ready).await?;
        let killed_pods = operator_pods(&ctx).await?;
        ctx.platform.operator_kill().await?;
        let killed = Instant::now();
        ensure!(
            last_failover(&ctx, "restart").await?.is_none(),
            "the failover was over before the operator was killed"
        );
        let promotion = await_promotion(&ctx, "restart", &primary, writer, fault).await?;
        Ok((promotion, killed_pods, killed))
    }
    .await;
    ctx.platform.pod_freeze(&ctx.ns, &primary, false).await?;
    let (promotion, killed_pods, killed) = failover?;
    let Promotion {
        pod: promoted,
        at: promoted_at,
        gap,
        ..
    } = promotion;
    ctx.platform.operator_start(ctx.timeout()).await?;
    rejoined(&ctx, &primary).await?;
    let last = last_failover(&ctx, "restart")
        .await?
        .context("no status.lastFailover")?;
    ensure!(
        (last.from.as_str(), last.to.as_str()) == (primary.as_str(), promoted.as_str()),
        "status.lastFailover says {} → {}, the cluster went {primary} → {promoted}",
        last.from,
        last.to
    );
    let now = lease_transitions(&ctx, "restart").await?;
    ensure!(
        now == transitions + 1,
        "leaseTransitions went {transitions} → {now}: not exactly one handover"
    );
    let reporters = until("one FailedOver Event", ctx.timeout(), || async {
        let reporters = failed_over_events(&ctx, "restart").await?;
        Ok(match reporters.len() {
            0 => Check::Pending("none yet".to_owned()),
            _ => Check::Done(reporters),
        })
    })
    .await?;
    ensure!(
        reporters.len() == 1,
        "{} FailedOver Events for one failover, from {reporters:?}",
        reporters.len()
    );
    // The killed operator did not finish the failover before it died: the next one did.
    ensure!(
        !killed_pods.contains(&reporters[0]),
        "the failover was reported by {:?}, an operator pod that was killed ({killed_pods:?})",
        reporters[0]
    );
    say(format!(
        "operator killed mid-failover ({:.1}s after {primary} froze): {promoted} promoted {:.1}s \
         after the freeze by the next operator ({}); 1 Lease transition, 1 FailedOver Event; write \
         gap {:.2}s; 0 rows lost; {primary} rejoined",
        killed.duration_since(fault).as_secs_f64(),
        promoted_at.duration_since(fault).as_secs_f64(),
        reporters[0],
        gap.as_secs_f64()
    ));
    Ok(())
}

/// `instances` 3 → 1 → 3 with the primary on ordinal 0: the StatefulSet removes ordinals 1
/// and 2, never the primary, whose writes go on; scaled up again, the replicas come back and
/// stream from it.
#[scenario]
async fn ha_scale_three_one_three(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "scale").await?;
    let before = ctx.pod_state(&primary).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let replicas = ["scale-1", "scale-2"];

    let down = Instant::now();
    let instances = |n: u8| serde_json::json!({"spec": {"instances": n}});
    ctx.merge_patch_postgresql_in(&ctx.ns, "scale", instances(1))
        .await?;
    until("ordinals 1 and 2 removed", ctx.timeout(), || async {
        let mut left = Vec::new();
        for pod in replicas {
            if pods.get_opt(pod).await?.is_some() {
                left.push(pod);
            }
        }
        Ok(Check::when(left.is_empty(), format!("{left:?} remain")))
    })
    .await?;
    let scaled_down = Instant::now();
    writer.wait_ack_after(scaled_down, ctx.timeout()).await?;
    let gap_down = longest_gap_within(&writer.acks(), down, scaled_down);
    let after = ctx.pod_state(&primary).await?;
    ensure!(
        after.uid == before.uid && after.restarts() == before.restarts(),
        "the primary was touched by the scale-down: {before} → {after}"
    );
    let slots = pod_sql(
        &ctx,
        &primary,
        "SELECT coalesce(string_agg(slot_name, ',' ORDER BY slot_name), '') FROM pg_replication_slots",
    )
    .await?;

    let up = Instant::now();
    ctx.merge_patch_postgresql_in(&ctx.ns, "scale", instances(3))
        .await?;
    ctx.wait_ready(&["scale"]).await?;
    for replica in replicas {
        rejoined_streaming(&ctx, replica, &primary).await?;
    }
    let scaled_up = Instant::now();
    let gap_up = longest_gap_within(&writer.acks(), up, scaled_up);
    let (acks, _) = check_acks(&ctx, "scale", writer, down, scaled_up).await?;
    let now = current_primary(&ctx, "scale").await?.unwrap_or_default();
    ensure!(now == primary, "the primary moved to {now}");
    say(format!(
        "scale 3→1→3 ({primary} primary throughout): down in {:.1}s with write gap {:.2}s \
         (slots left on the primary: {slots:?}); up and streaming in {:.1}s with write gap \
         {:.2}s; {} rows acknowledged, 0 lost",
        scaled_down.duration_since(down).as_secs_f64(),
        gap_down.as_secs_f64(),
        scaled_up.duration_since(up).as_secs_f64(),
        gap_up.as_secs_f64(),
        acks.len()
    ));
    Ok(())
}
