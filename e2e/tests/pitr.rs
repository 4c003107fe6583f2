//! Point-in-time restore on real pods, the user's path with the inputs the docs show: a
//! two-instance source archiving into the in-cluster MinIO, a physical Backup (read from the
//! replica, the default), a writer through `-rw`, and a new two-instance cluster restored to a
//! time written as `samples/postgresql-pitr.yaml` writes it (RFC 3339 with `Z`). Every row
//! committed before the target is there, none after; the restored cluster points at nothing of
//! the source's, and its primary comes back after a crash (the next start once crash-looped).
//! Then the total loss: every pod of the source frozen at once and the cluster deleted, a new
//! cluster restored to the end of the archive, and the span of acknowledged rows lost printed
//! (the RPO; `walArchive.timeoutSeconds` is 5 by default).

use std::time::{Duration, Instant};

use tusk_e2e::cluster::{condition, conditions};
use tusk_e2e::faults::kill_postmaster;
use tusk_e2e::manifests::{archiving, physical_backup, point_in_time};
use tusk_e2e::replication::{Writer, current_primary, pod_sql, rows, time_between_rows};
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

/// Waits for a cluster that restores to be Ready (a restore takes longer than a bootstrap);
/// its `Restored` condition's message.
async fn restored(ctx: &Ctx, name: &str) -> Result<String> {
    until(
        format!("{name} restored and Ready"),
        ctx.timeout() * 3,
        || async {
            let pg = ctx.postgresql_in(&ctx.ns, name).await?;
            let found = |t: &str| condition(conditions(&pg), t).map(|c| c.status.clone());
            let seen = tusk_e2e::cluster::describe(conditions(&pg));
            Ok(
                match (found("Restored").as_deref(), found("Ready").as_deref()) {
                    (Some("True"), Some("True")) => Check::Done(seen),
                    _ => Check::Pending(seen),
                },
            )
        },
    )
    .await
}

#[scenario]
async fn point_in_time_restores_on_real_pods_by_time_and_after_total_loss(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    ctx.require_l4_bucket()?;
    let (source, endpoint) = ("ledger", ctx.settings.s3_endpoint.clone());
    ctx.apply(&archiving(source, 2, &endpoint)).await?;
    ctx.wait_ready(&[source]).await?;
    let primary = current_primary(&ctx, source).await?.unwrap_or_default();
    let writer = Writer::start(&ctx, source).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    ctx.apply(&physical_backup("ledger-base", source)).await?;
    ctx.wait_backup_condition_in(&ctx.ns, "ledger-base", "Completed")
        .await?;

    // The target between two reads of the newest row, each in its own session: rows up to
    // `before` committed before the target, rows after `after` after it.
    let (before, target, after) = time_between_rows(&ctx, &primary).await?;
    writer
        .wait_ack_after(Instant::now() + Duration::from_secs(3), ctx.timeout())
        .await?;

    let copy = "ledger-at";
    let target_yaml = format!("{{time: \"{target}\"}}");
    ctx.apply(&point_in_time(copy, 2, source, &target_yaml, &endpoint))
        .await?;
    let seen = restored(&ctx, copy).await?;
    let present = rows(&ctx, copy).await?;
    let newest = present.last().copied().unwrap_or_default();
    ensure!(
        (before..=after).contains(&newest),
        "restored to {target}: the newest row is {newest}, not between {before} (committed \
         before the target) and {after} (read after it)"
    );
    let source_rows = rows(&ctx, source).await?;
    let expected: Vec<i64> = source_rows.into_iter().filter(|n| *n <= newest).collect();
    ensure!(
        present == expected,
        "the restore is not the source's rows up to {newest}: {} rows, the source {}",
        present.len(),
        expected.len()
    );
    let copy_primary = current_primary(&ctx, copy).await?.unwrap_or_default();
    let upstream = pod_sql(&ctx, &copy_primary, "SHOW primary_conninfo").await?;
    ensure!(
        !upstream.contains(source),
        "the restored primary still points at the source: {upstream}"
    );
    say(format!(
        "{copy} restored to {target}: {} rows, up to row {newest} (committed before the \
         target: ≤ {before}; read after it: {after}); {seen}",
        present.len()
    ));

    // The crash loop came at the next start of the restored primary.
    kill_postmaster(&ctx, &copy_primary).await?;
    until(
        format!("{copy_primary} serving again after a crash"),
        ctx.timeout(),
        || async {
            Ok(
                match pod_sql(&ctx, &copy_primary, "SELECT count(*) FROM writes").await {
                    Ok(count) if count == present.len().to_string() => Check::Done(()),
                    other => Check::Pending(format!("{other:?}")),
                },
            )
        },
    )
    .await?;

    // The total loss: every pod of the source stopped at once, then the cluster gone.
    let pods = [format!("{source}-0"), format!("{source}-1")];
    for pod in &pods {
        ctx.platform.pod_freeze(&ctx.ns, pod, true).await?;
    }
    let lost_at = Instant::now();
    let acks = writer.stop();
    ctx.delete_postgresql_and_wait_in(&ctx.ns, source).await?;
    let last = ctx.postgresqls_in(&ctx.ns).get_opt(source).await?;
    ensure!(last.is_none(), "{source} still exists");

    let survivor = "ledger-after";
    ctx.apply(&point_in_time(survivor, 1, source, "{}", &endpoint))
        .await?;
    restored(&ctx, survivor).await?;
    let present = rows(&ctx, survivor).await?;
    let newest = present.last().copied().unwrap_or_default();
    let acked: Vec<_> = acks.iter().filter(|a| a.at <= lost_at).collect();
    let holes: Vec<i64> = acked
        .iter()
        .map(|a| a.n)
        .filter(|n| *n <= newest && present.binary_search(n).is_err())
        .collect();
    ensure!(
        holes.is_empty(),
        "acknowledged rows missing before the restore's newest row {newest}: {holes:?}"
    );
    let kept = acked.iter().rev().find(|a| a.n <= newest);
    let (last_ack, lost) = (acked.last(), acked.iter().filter(|a| a.n > newest).count());
    let span = match (kept, last_ack) {
        (Some(kept), Some(last)) => last.at.duration_since(kept.at),
        _ => Duration::ZERO,
    };
    say(format!(
        "total loss: {} acknowledged rows, {} restored to the end of the archive, {lost} lost; \
         RPO (acknowledged writes lost) {:.1} s",
        acked.len(),
        present.len(),
        span.as_secs_f64()
    ));
    Ok(())
}
