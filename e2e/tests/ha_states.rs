//! The states faults leave behind, on real pods (e2e/local/node-run.sh): a replica promoted
//! behind the managers' back, the primary's volume deleted with its pod, a replica back from a
//! scale-down whose WAL is gone, and a status that missed a handover. A writer runs through
//! `-rw` with `required` synchronous replication; after each, every acknowledged row is present,
//! the cluster is Ready with one primary and every replica streams. Each prints one line.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Event, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, LogParams, Patch, PatchParams};
use tusk_e2e::faults::{check_acks, instance_status, rejoined_streaming, started_with_writer};
use tusk_e2e::replication::{Writer, current_primary, pod_sql, synchronous};
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

/// A three-instance cluster with `required` synchronous replication (`ANY 1`) and a writer
/// through `-rw`; returns its primary (ordinal 0) and the writer.
async fn three_required(ctx: &Ctx, name: &str) -> Result<(String, Writer)> {
    started_with_writer(ctx, name, &synchronous(name, 3, "required")).await
}

/// Every instance but `primary` streams from it, and the cluster is Ready.
async fn healed(ctx: &Ctx, name: &str, primary: &str) -> Result {
    ctx.wait_ready(&[name]).await?;
    for ordinal in 0..3 {
        let pod = format!("{name}-{ordinal}");
        if pod != primary {
            rejoined_streaming(ctx, &pod, primary).await?;
        }
    }
    Ok(())
}

/// A user runs `pg_promote()` on a replica (or `recovery_target_action=promote` did): a second
/// server out of recovery. Its manager sees the server's own answer, fences it and rewinds it
/// back into a replica; the primary never stopped, and nothing acknowledged is lost.
#[scenario]
async fn ha_replica_promoted_behind_the_back_is_fenced(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_required(&ctx, "rogue").await?;
    let rogue = "rogue-2";
    let promotions = promotions_logged(&ctx, rogue).await?;
    let fault = Instant::now();
    // Without waiting: the manager fences the server, which may end this very session.
    pod_sql(&ctx, rogue, "SELECT pg_promote(wait => false)").await?;
    // First out of recovery (the server's own log says it took a new timeline: being in
    // recovery, which also holds before the promotion takes effect, proves nothing), then
    // fenced for it (its manager's Warning Event names the pod) and no longer a primary.
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let fenced = until(
        format!("{rogue} promoted, then fenced"),
        ctx.timeout(),
        || async {
            let promoted = promotions_logged(&ctx, rogue).await? > promotions;
            let listed = events.list(&ListParams::default()).await?;
            let event = (listed.items.iter()).any(|e| {
                e.reason.as_deref() == Some("Fenced")
                    && e.involved_object.name.as_deref() == Some(rogue)
            });
            let status = instance_status(&ctx, rogue).await?;
            let done = promoted && event && (status.fenced || status.in_recovery == Some(true));
            let seen = format!(
                "new timeline logged: {promoted}, Fenced Event: {event}, {:?}",
                status.role
            );
            Ok(Check::when(done, seen))
        },
    )
    .await
    .map(|()| fault.elapsed())?;
    healed(&ctx, "rogue", &primary).await?;
    let healed_at = Instant::now();
    let (acks, gap) = check_acks(&ctx, "rogue", writer, fault, healed_at).await?;
    let now = current_primary(&ctx, "rogue").await?.unwrap_or_default();
    ensure!(now == primary, "the primary moved to {now}");
    say(format!(
        "{rogue} promoted by hand: fenced within {:.1}s, back as a streaming replica after \
         {:.1}s; {primary} primary throughout, write gap {:.2}s; {} rows acknowledged, 0 lost",
        fenced.as_secs_f64(),
        healed_at.duration_since(fault).as_secs_f64(),
        gap.as_secs_f64(),
        acks.len()
    ));
    Ok(())
}

/// How many promotions `pod`'s server has logged ("selected new timeline ID" is PostgreSQL's line
/// when a promotion takes effect); the log outlives the postmaster, which the manager restarts.
async fn promotions_logged(ctx: &Ctx, pod: &str) -> Result<usize> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let params = LogParams {
        container: Some("postgres".into()),
        ..LogParams::default()
    };
    let log = pods.logs(pod, &params).await?;
    Ok(log.matches("selected new timeline ID").count())
}

/// The runbook "delete the PVC and the pod to rebuild it", applied to the primary: its pod comes
/// back, still the Lease's holder, on an empty volume. It never runs initdb over a cluster that
/// served: it lets the Lease go, a replica (holding every acknowledged row) is promoted, and
/// the rebuilt pod clones it — same system identifier, every row.
#[scenario]
async fn ha_primary_volume_deleted_fails_over_and_clones(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_required(&ctx, "wiped").await?;
    let system = instance_status(&ctx, &primary)
        .await?
        .system_identifier
        .unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let claim = format!("data-{primary}");
    let fault = Instant::now();
    claims.delete(&claim, &DeleteParams::default()).await?;
    pods.delete(&primary, &DeleteParams::default().grace_period(0))
        .await?;
    until("another instance promoted", ctx.timeout(), || async {
        let now = current_primary(&ctx, "wiped").await?.unwrap_or_default();
        Ok(Check::when(now != primary && !now.is_empty(), now))
    })
    .await?;
    let promoted = current_primary(&ctx, "wiped").await?.unwrap_or_default();
    healed(&ctx, "wiped", &promoted).await?;
    let healed_at = Instant::now();
    let rebuilt = instance_status(&ctx, &primary).await?;
    ensure!(
        rebuilt.system_identifier.as_deref() == Some(system.as_str()),
        "{primary} rebuilt with system {:?}, the cluster's is {system}",
        rebuilt.system_identifier
    );
    let (acks, gap) = check_acks(&ctx, "wiped", writer, fault, healed_at).await?;
    say(format!(
        "{primary}'s claim and pod deleted: {promoted} promoted, {primary} cloned it back in \
         {:.1}s (system {system} kept); write gap {:.2}s; {} rows acknowledged, 0 lost",
        healed_at.duration_since(fault).as_secs_f64(),
        gap.as_secs_f64(),
        acks.len()
    ));
    Ok(())
}

/// Scale 3 → 2, writes and forced WAL switches past what the removed replica's retained claim
/// holds (its slot went with it), scale back to 3: the replica returns on its old claim, cannot
/// stream (the WAL it needs is gone), and is cloned again instead of staying Ready with stale
/// data.
#[scenario]
async fn ha_replica_back_from_a_scale_down_without_its_wal_heals(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_required(&ctx, "regrow").await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let instances = |n: u8| serde_json::json!({"spec": {"instances": n}});
    // The segment being written when regrow-2 goes: the one it would have to stream from.
    let needed = pod_sql(
        &ctx,
        &primary,
        "SELECT pg_walfile_name(pg_current_wal_lsn())",
    )
    .await?;
    let needed = needed.trim().to_owned();
    let fault = Instant::now();
    ctx.merge_patch_postgresql_in(&ctx.ns, "regrow", instances(2))
        .await?;
    until("ordinal 2 removed", ctx.timeout(), || async {
        Ok(Check::when(
            pods.get_opt("regrow-2").await?.is_none(),
            "regrow-2 remains",
        ))
    })
    .await?;
    // The segment goes once nothing holds it: regrow-2's slot is dropped by the primary's
    // manager at its next slot sync after the scale-down, not at once (checked once, this
    // failed in CI 8 s in with the slot not yet dropped); switches and checkpoints until then.
    let switch = "CHECKPOINT; SELECT pg_switch_wal(); CHECKPOINT; SELECT pg_switch_wal(); \
                  CHECKPOINT";
    let gone = format!("SELECT count(*) FROM pg_ls_waldir() WHERE name = '{needed}'");
    let slots = "SELECT coalesce(string_agg(slot_name || '@' || coalesce(restart_lsn::text, '-'), \
                 ', '), 'none') FROM pg_replication_slots";
    until(
        format!("{needed} gone from {primary}'s pg_wal"),
        ctx.timeout(),
        || async {
            pod_sql(&ctx, &primary, switch).await?;
            let left = pod_sql(&ctx, &primary, &gone).await?;
            let held_by = pod_sql(&ctx, &primary, slots).await?;
            Ok(Check::when(
                left.trim() == "0",
                format!("still there; slots: {}", held_by.trim()),
            ))
        },
    )
    .await?;
    ctx.merge_patch_postgresql_in(&ctx.ns, "regrow", instances(3))
        .await?;
    healed(&ctx, "regrow", &primary).await?;
    let healed_at = Instant::now();
    // Repaired by a new clone (its manager's Warning Event), not by streaming what was gone.
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let listed = events.list(&ListParams::default()).await?;
    let recloned = (listed.items.iter()).any(|e| {
        e.reason.as_deref() == Some("Recloned")
            && e.involved_object.name.as_deref() == Some("regrow-2")
    });
    ensure!(recloned, "regrow-2 streams again without a Recloned Event");
    let (acks, gap) = check_acks(&ctx, "regrow", writer, fault, healed_at).await?;
    say(format!(
        "scale 3→2, WAL switched past regrow-2's claim, scale →3: streaming again after {:.1}s; \
         write gap {:.2}s; {} rows acknowledged, 0 lost",
        healed_at.duration_since(fault).as_secs_f64(),
        gap.as_secs_f64(),
        acks.len()
    ));
    Ok(())
}

/// A handover whose status write was lost (the operator killed right after it, or a later step
/// failing): the status still names the old primary, which has rejoined as a Ready replica.
/// The role labels follow the Lease, not the status, so `-rw` never sends writes to the
/// read-only former primary.
#[scenario]
async fn ha_labels_follow_the_lease_after_a_lost_status_write(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let (primary, writer) = three_required(&ctx, "lostwrite").await?;
    let target = "lostwrite-1";
    let fault = Instant::now();
    tusk_e2e::switchover::request_switchover(&ctx, "lostwrite", target).await?;
    until(format!("{target} primary"), ctx.timeout(), || async {
        let now = current_primary(&ctx, "lostwrite")
            .await?
            .unwrap_or_default();
        Ok(Check::when(now == target, now))
    })
    .await?;
    healed(&ctx, "lostwrite", target).await?;
    // The status the lost write would have left: the old primary still named.
    let api = ctx.postgresqls_in(&ctx.ns);
    let status = serde_json::json!({"status": {"currentPrimary": primary}});
    api.patch_status("lostwrite", &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    // Any change to a child triggers a reconcile.
    let config: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let touch = serde_json::json!({"metadata": {"annotations": {"e2e.tusk.dev/touch": "1"}}});
    config
        .patch(
            "lostwrite-config",
            &PatchParams::default(),
            &Patch::Merge(&touch),
        )
        .await?;
    let relabelled = AtomicBool::new(false);
    until(
        "the labels and the status follow the Lease",
        ctx.timeout(),
        || async {
            let now = current_primary(&ctx, "lostwrite")
                .await?
                .unwrap_or_default();
            let old = pods_role(&ctx, &primary).await?;
            let new = pods_role(&ctx, target).await?;
            // At no moment may the read-only former primary be labelled for `-rw`.
            if old == "primary" {
                relabelled.store(true, Ordering::Relaxed);
            }
            Ok(Check::when(
                now == target && old == "replica" && new == "primary",
                format!("status {now}, {primary} {old}, {target} {new}"),
            ))
        },
    )
    .await?;
    ensure!(
        !relabelled.load(Ordering::Relaxed),
        "{primary} was labelled primary again after the status named it"
    );
    // And not later either: watched for a while after the status followed the Lease.
    let watched_until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < watched_until {
        let old = pods_role(&ctx, &primary).await?;
        ensure!(old != "primary", "{primary} labelled primary again");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let landed = Instant::now();
    let (acks, gap) = check_acks(&ctx, "lostwrite", writer, fault, landed).await?;
    say(format!(
        "switchover to {target}, then the status put back to {primary}: the labels stayed with \
         the Lease's holder; write gap {:.2}s; {} rows acknowledged, 0 lost",
        gap.as_secs_f64(),
        acks.len()
    ));
    Ok(())
}

/// The `tusk.dev/role` label of `pod`.
async fn pods_role(ctx: &Ctx, pod: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let found = pods.get(pod).await?;
    Ok(found
        .metadata
        .labels
        .and_then(|l| l.get("tusk.dev/role").cloned())
        .unwrap_or_default())
}
