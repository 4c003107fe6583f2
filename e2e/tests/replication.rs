//! Replication on real pods (e2e/local/node-run.sh): a primary with streaming replicas, the
//! primary lost in two ways, and the invariants after each fault — every acknowledged row
//! present, no commit on an old timeline after the first on the new one, the former primary
//! back as a replica. The write gaps printed here are single runs; the benchmark repeats them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use tusk_e2e::faults::{
    Promotion, await_promotion, check_writes, kill_postmaster, rejoined, replayed,
    three_with_writer,
};
use tusk_e2e::replication::{Writer, current_primary, pod_sql, replicated};
use tusk_e2e::switchover::{pod_event, request_switchover, switched_over};
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

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
        replayed(&ctx, replica, last).await?;
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
    kill_postmaster(&ctx, &primary).await?;
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
    // Ready, not just created: until the kubelet has killed it the old postmaster still
    // acknowledges writes, and the outage would fall after the measured window.
    ctx.wait_pod(&primary, "a new pod, Ready", |p| {
        p.uid != old.uid && p.ready
    })
    .await?;
    let gap = check_writes(&ctx, "lost", writer, fault, Instant::now()).await?;
    let now = current_primary(&ctx, "lost").await?.unwrap_or_default();
    ensure!(
        now == primary,
        "{primary} came back and should have kept the primary role (a restart within the \
         Lease, not a failover), but the primary is now {now:?}"
    );
    say(format!(
        "{primary} force-deleted: back as the primary; write gap {:.2}s; 0 rows lost",
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
    let promotion = await_promotion(&ctx, "frozen", &primary, writer, fault).await;
    // Thawed whatever happened: a frozen container would also hold up the namespace's deletion.
    ctx.platform.pod_freeze(&ctx.ns, &primary, false).await?;
    let Promotion {
        pod: promoted,
        at,
        gap,
        ..
    } = promotion?;
    rejoined(&ctx, &primary).await?;
    say(format!(
        "{primary} frozen: {promoted} promoted {:.1}s after the freeze; write gap {:.2}s; 0 rows \
         lost; {primary} thawed, fenced and rejoined as a replica",
        at.duration_since(fault).as_secs_f64(),
        gap.as_secs_f64()
    ));
    Ok(())
}

/// The failover above on the newer major (PostgreSQL 17; the suite's other scenarios run 15 on
/// the real node): the cluster initialises and streams on it, a frozen primary is replaced, the
/// promoted replica takes the writes with none lost, and the old primary rewinds with 17's
/// `pg_rewind` and rejoins. What a major-version upgrade lands on must work before an upgrade
/// can land there.
#[scenario]
async fn ha_on_the_newer_major_fails_over_and_rejoins(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let name = "next";
    ctx.apply_next_major(&replicated(name, 3).replace("\"18\"", "\"17\""))
        .await?;
    ctx.wait_ready(&[name]).await?;
    let primary = current_primary(&ctx, name).await?.unwrap_or_default();
    ensure!(
        primary == "next-0",
        "ordinal 0 initialises and holds the Lease, status says {primary:?}"
    );
    let major = pod_sql(
        &ctx,
        &primary,
        "SELECT current_setting('server_version_num')::int / 10000",
    )
    .await?;
    ensure!(major == "17", "{primary} runs PostgreSQL {major}, not 17");
    let writer = Writer::start(&ctx, name).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let fault = Instant::now();
    ctx.platform.pod_freeze(&ctx.ns, &primary, true).await?;
    let promotion = await_promotion(&ctx, name, &primary, writer, fault).await;
    ctx.platform.pod_freeze(&ctx.ns, &primary, false).await?;
    let Promotion {
        pod: promoted, gap, ..
    } = promotion?;
    rejoined(&ctx, &primary).await?;
    say(format!(
        "PostgreSQL {major}: {primary} frozen, {promoted} promoted; write gap {:.2}s; 0 rows \
         lost; {primary} rewound and rejoined as a replica",
        gap.as_secs_f64()
    ));
    Ok(())
}

/// A planned switchover under load: the old primary checkpoints and shuts down cleanly, the
/// target is promoted only once it replayed the old primary's final WAL, writes resume through
/// `-rw` with nothing lost, and the old primary rejoins as a replica.
#[scenario]
async fn ha_switchover_under_load(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "switch").await?;
    let target = "switch-1";
    let fault = Instant::now();
    request_switchover(&ctx, "switch", target).await?;
    let record = switched_over(&ctx, "switch", target).await;
    let landed = Instant::now();
    let gap = check_writes(&ctx, "switch", writer, fault, landed).await;
    let (record, gap) = (record?, gap?);
    ensure!(
        record.reason == "Switchover" && record.from == primary,
        "status.lastFailover: {record:?}"
    );
    rejoined(&ctx, &primary).await?;
    // The managers' own account of it.
    pod_event(&ctx, &primary, "Demoted").await?;
    pod_event(&ctx, target, "Promoted").await?;
    say(format!(
        "switchover {primary} -> {target}: Lease handed over {:.1}s after the request; write gap \
         {:.2}s; 0 rows lost; {primary} rejoined as a replica",
        record.seconds.unwrap_or_default(),
        gap.as_secs_f64()
    ));
    Ok(())
}

/// Waits until exactly `names` are the database pods of `cluster`, every one ready and none of
/// them one of `old_uids`; their creation times, in `names`' order.
async fn replaced(
    ctx: &Ctx,
    cluster: &str,
    names: &[String],
    old_uids: &[String],
) -> Result<Vec<k8s_openapi::jiff::Timestamp>> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let selector = format!("tusk.dev/cluster={cluster}");
    until(
        format!("{cluster}'s pods replaced"),
        ctx.timeout(),
        || async {
            let list = pods
                .list(&kube::api::ListParams::default().labels(&selector))
                .await?;
            let mut found: Vec<String> = list
                .items
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            found.sort();
            let mut created = Vec::new();
            let mut pending = Vec::new();
            for name in names {
                let pod = list
                    .items
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(name));
                let state = match pod {
                    Some(_) => ctx.pod_state(name).await?,
                    None => {
                        pending.push(format!("{name} missing"));
                        continue;
                    }
                };
                if old_uids.contains(&state.uid) || !state.ready {
                    pending.push(format!("{name}: {state}"));
                }
                if let Some(at) = pod.and_then(|p| p.metadata.creation_timestamp.clone()) {
                    created.push(at.0);
                }
            }
            Ok(if pending.is_empty() && found == names {
                Check::Done(created)
            } else {
                Check::Pending(format!("pods {found:?}; {}", pending.join("; ")))
            })
        },
    )
    .await
}

/// A change to the pod template (here a parameter, through the config checksum) rolls the
/// replicas first, one at a time, then switches over, then restarts the old primary last;
/// nothing acknowledged is lost and the gap is a switchover's, not a crash's.
#[scenario]
async fn ha_rolling_update_restarts_the_primary_last(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_with_writer(&ctx, "roll").await?;
    let names: Vec<String> = (0..3).map(|i| format!("roll-{i}")).collect();
    let mut old_uids = Vec::new();
    for name in &names {
        old_uids.push(ctx.pod_state(name).await?.uid);
    }
    let fault = Instant::now();
    let parameters = serde_json::json!({"spec": {"parameters": {"work_mem": "8MB"}}});
    ctx.merge_patch_postgresql_in(&ctx.ns, "roll", parameters)
        .await?;
    let done = AtomicBool::new(false);
    let (created, most_down) = tokio::join!(
        async {
            let created = replaced(&ctx, "roll", &names, &old_uids).await;
            done.store(true, Ordering::Relaxed);
            created
        },
        most_pods_down(&ctx, &names, &done),
    );
    let (created, most_down) = (created?, most_down?);
    let landed = Instant::now();
    ensure!(
        most_down.0 <= 1,
        "pods down at once during the rolling update: {} ({:?})",
        most_down.0,
        most_down.1
    );
    let gap = check_writes(&ctx, "roll", writer, fault, landed).await?;
    let now = current_primary(&ctx, "roll").await?.unwrap_or_default();
    ensure!(
        now != primary,
        "{primary} is still the primary: it was not switched over"
    );
    let last = created.iter().max().copied();
    ensure!(
        created.first().copied() == last,
        "{primary} was not the last pod restarted: created at {created:?}"
    );
    say(format!(
        "rolling update: one pod down at a time ({} samples), replicas first, then a switchover \
         to {now}, {primary} restarted last; write gap {:.2}s; 0 rows lost",
        most_down.2,
        gap.as_secs_f64()
    ));
    Ok(())
}

/// Samples the pods `names` about every 200 ms until `done`: the most missing or not Ready at
/// one moment, which they were, and how many samples were taken.
async fn most_pods_down(
    ctx: &Ctx,
    names: &[String],
    done: &AtomicBool,
) -> Result<(usize, Vec<String>, usize)> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let (mut most, mut which, mut samples) = (0, Vec::new(), 0);
    while !done.load(Ordering::Relaxed) {
        let list = pods.list(&kube::api::ListParams::default()).await?;
        let down: Vec<String> = (names.iter())
            .filter(|name| {
                let pod = list
                    .items
                    .iter()
                    .find(|p| p.metadata.name.as_ref() == Some(*name));
                !pod.is_some_and(|p| {
                    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
                    conditions
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                        && p.metadata.deletion_timestamp.is_none()
                })
            })
            .cloned()
            .collect();
        samples += 1;
        if down.len() > most {
            (most, which) = (down.len(), down);
        }
        // Pacing, not synchronisation: `done` ends the loop.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Ok((most, which, samples))
}

/// Scaling 3 -> 1 while the primary is ordinal 2: the operator switches over to ordinal 0
/// before the StatefulSet shrinks, so the primary's pod is never the one removed.
#[scenario]
async fn ha_scale_down_moves_the_primary_first(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (_, writer) = three_with_writer(&ctx, "shrink").await?;
    request_switchover(&ctx, "shrink", "shrink-2").await?;
    switched_over(&ctx, "shrink", "shrink-2").await?;
    let fault = Instant::now();
    let instances = serde_json::json!({"spec": {"instances": 1}});
    ctx.merge_patch_postgresql_in(&ctx.ns, "shrink", instances)
        .await?;
    let record = switched_over(&ctx, "shrink", "shrink-0").await?;
    replaced(&ctx, "shrink", &["shrink-0".to_owned()], &[]).await?;
    let gap = check_writes(&ctx, "shrink", writer, fault, Instant::now()).await?;
    ensure!(record.from == "shrink-2", "status.lastFailover: {record:?}");
    say(format!(
        "scale 3 -> 1 with the primary on ordinal 2: switched over to shrink-0 first, then \
         shrunk; write gap {:.2}s; 0 rows lost",
        gap.as_secs_f64()
    ));
    Ok(())
}
