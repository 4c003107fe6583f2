//! The archive through the HA faults on real pods: three instances archiving into the in-cluster
//! MinIO with a writer through `-rw` the whole time, and after each fault a base backup and
//! the primary's continuity check after it. The faults: the primary's postmaster killed
//! (restart in place), the primary frozen (the Lease waited out, a replica promoted, the old
//! primary rewound back), the primary's pod force-deleted. Every check finds the archive whole
//! across every timeline (no false alarm), and no acknowledged row is lost: replication is
//! synchronous (`required`), the mode that promises it (an asynchronous failover may lose the
//! last commits, as the docs say; CI once saw one row lost so). After each fault the
//! segment the primary writes into is archived with no switch by hand: `archive_timeout` holds
//! after a restart in place too (PostgreSQL 15's checkpointer, left asleep by a clean start,
//! once kept it silent for minutes; the manager's checkpoint after a start wakes it).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use tusk_e2e::faults::{
    check_writes, instance_status, kill_postmaster, promoted_other_than, rejoined,
    started_with_writer,
};
use tusk_e2e::manifests::{archived, physical_backup};
use tusk_e2e::replication::{current_primary, pod_sql, synchronous};
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

/// Twelve times the cluster's `archive_timeout` (5 s); the checkpointer's own sleep is 300 s.
const CLOSED_BY_TIME: Duration = Duration::from_secs(60);

/// The segment the primary writes into now, archived without a switch by hand (the writer
/// keeps writing): how long it took.
async fn closed_by_time(ctx: &Ctx, cluster: &str) -> Result<String> {
    let primary = current_primary(ctx, cluster).await?.unwrap_or_default();
    let now = "SELECT pg_walfile_name(pg_current_wal_insert_lsn())";
    let open = pod_sql(ctx, &primary, now).await?;
    let asked = Instant::now();
    until(
        format!("{primary}'s {open} closed by archive_timeout and archived"),
        CLOSED_BY_TIME,
        || async {
            let status = instance_status(ctx, &primary).await?;
            let last = status.archive.and_then(|a| a.last_archived_wal);
            Ok(match last {
                Some(last) if last.as_str() >= open.as_str() => Check::Done(()),
                other => Check::Pending(format!("last archived {other:?}")),
            })
        },
    )
    .await?;
    Ok(format!(
        "{open} archived {:.1}s later",
        asked.elapsed().as_secs_f64()
    ))
}

/// Takes physical Backup `backup` of `cluster`, waits until it is Completed and until the
/// primary's continuity check counts `n` base backups; that check, which must be whole.
async fn backed_up_and_checked(ctx: &Ctx, cluster: &str, backup: &str, n: u64) -> Result<String> {
    ctx.apply(&physical_backup(backup, cluster)).await?;
    ctx.wait_backup_condition_in(&ctx.ns, backup, "Completed")
        .await?;
    let primary = current_primary(ctx, cluster).await?.unwrap_or_default();
    let check = until(
        format!("{primary}'s continuity check counting {n} base backups"),
        ctx.timeout(),
        || async {
            let status = instance_status(ctx, &primary).await?;
            let check = status.archive.and_then(|a| a.continuity);
            Ok(match check {
                Some(c) if c.base_backups >= n => Check::Done(c),
                other => Check::Pending(format!("{other:?}")),
            })
        },
    )
    .await?;
    ensure!(
        check.missing_count == 0 && check.missing_history.is_empty() && check.foreign.is_empty(),
        "a false alarm after {backup}: {check:?}"
    );
    Ok(format!(
        "{primary}: {} segments whole from {} to {} over timelines {:?}",
        check.segments,
        check.first_segment.unwrap_or_default(),
        check.last_segment.unwrap_or_default(),
        check.timelines
    ))
}

#[scenario]
async fn archive_stays_whole_through_the_ha_faults(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    ctx.require_l4_bucket()?;
    let name = "faults";
    let manifest = archived(&synchronous(name, 3, "required"), &ctx.settings.s3_endpoint);
    let (primary, writer) = started_with_writer(&ctx, name, &manifest).await?;
    let started = Instant::now();
    say(format!("before: {}", closed_by_time(&ctx, name).await?));
    say(format!(
        "before: {}",
        backed_up_and_checked(&ctx, name, "base-1", 1).await?
    ));

    // 1. kill -9 of the postmaster: restarted in place.
    kill_postmaster(&ctx, &primary).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    say(format!("after it: {}", closed_by_time(&ctx, name).await?));
    say(format!(
        "postmaster killed: {}",
        backed_up_and_checked(&ctx, name, "base-2", 2).await?
    ));

    // 2. The primary frozen: a replica promoted, the old primary back as a replica.
    let frozen = current_primary(&ctx, name).await?.unwrap_or_default();
    ctx.platform.pod_freeze(&ctx.ns, &frozen, true).await?;
    let promoted = promoted_other_than(&ctx, name, &frozen).await;
    ctx.platform.pod_freeze(&ctx.ns, &frozen, false).await?;
    let promoted = promoted?;
    rejoined(&ctx, &frozen).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    say(format!("after it: {}", closed_by_time(&ctx, name).await?));
    say(format!(
        "{frozen} frozen, {promoted} promoted: {}",
        backed_up_and_checked(&ctx, name, "base-3", 3).await?
    ));

    // 3. The primary's pod force-deleted.
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let deleted = current_primary(&ctx, name).await?.unwrap_or_default();
    let old = ctx.pod_state(&deleted).await?;
    pods.delete(&deleted, &DeleteParams::default().grace_period(0))
        .await?;
    ctx.wait_pod(&deleted, "a new pod, Ready", |p| {
        p.uid != old.uid && p.ready
    })
    .await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    say(format!("after it: {}", closed_by_time(&ctx, name).await?));
    say(format!(
        "{deleted} force-deleted: {}",
        backed_up_and_checked(&ctx, name, "base-4", 4).await?
    ));

    check_writes(&ctx, name, writer, started, Instant::now()).await?;
    say(
        "3 faults, 4 continuity checks after base backups: 0 false alarms; every segment closed by \
         archive_timeout; 0 acknowledged rows lost",
    );
    Ok(())
}
