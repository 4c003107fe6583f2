//! An in-place major-version upgrade as a user takes it (`spec.upgrade.method: inPlace`,
//! docs/src/cluster/upgrades.md): a replicated cluster on the older major under a writer.
//! First pg_upgrade refuses (an extension the new major no longer ships: `adminpack`, removed
//! in 17): the cluster serves the old major again, unchanged, and says why. Fixed, and the
//! version raised again: every instance stops, pg_upgrade --link upgrades the primary's volume
//! in a Job whose old binaries come from the old image, the set starts on the new major with
//! its replicas cloned again, and every acknowledged row is there. The cluster archives WAL:
//! a base backup of the old system is taken before anything stops (the way back), and one of
//! the new system once it serves.

use std::time::{Duration, Instant};

use tusk::crd::BackupPhase;
use tusk_e2e::manifests::archived;
use tusk_e2e::replication::{Writer, current_primary, pod_sql, write_gap};
use tusk_e2e::upgrades::{ended, every_ack_on, major, majors};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};

const NAME: &str = "inplace";

fn spec(version: &str) -> String {
    format!(
        "apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {{name: {NAME}}}
spec:
  version: \"{version}\"
  instances: 2
  storage: {{size: 1Gi}}
  upgrade: {{method: inPlace}}
"
    )
}

#[scenario]
async fn an_in_place_upgrade_refused_by_pg_upgrade_serves_the_old_major_and_once_fixed_upgrades_with_every_row(
    ctx: Ctx,
) -> Result {
    ctx.require_real_pods()?;
    ctx.require_l4_bucket()?;
    let (version, raise) = majors(&ctx);
    let to_version = raise["version"].as_str().unwrap_or_default().to_owned();
    ctx.apply(&archived(&spec(&version), &ctx.settings.s3_endpoint))
        .await?;
    ctx.wait_ready(&[NAME]).await?;
    let before = ctx.postgresql_in(&ctx.ns, NAME).await?;
    let back = serde_json::json!({"spec": {
        "version": serde_json::to_value(before.spec.version)?,
        "image": before.spec.image,
    }});
    let system_before = (before.status.as_ref())
        .and_then(|s| s.system_identifier.clone())
        .context("the system identifier recorded")?;
    let primary = current_primary(&ctx, NAME).await?.context("a primary")?;
    let from = major(&ctx, &primary).await?;
    pod_sql(
        &ctx,
        &primary,
        "CREATE TABLE kept (id bigserial PRIMARY KEY, note text); \
         INSERT INTO kept (note) SELECT md5(g::text) FROM generate_series(1, 1000) g; \
         CREATE EXTENSION adminpack",
    )
    .await?;
    let writer = Writer::start(&ctx, NAME).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;

    // 1. Refused by pg_upgrade's check: the old major serves again, and says why.
    ctx.merge_patch_postgresql_in(&ctx.ns, NAME, serde_json::json!({"spec": raise}))
        .await?;
    let failed = ended(&ctx, NAME, "UpgradeFailed", Duration::from_secs(900)).await?;
    ensure!(
        failed.contains("adminpack"),
        "the failure does not name the extension: {failed}"
    );
    ctx.wait_ready(&[NAME]).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let serving = current_primary(&ctx, NAME).await?.context("a primary")?;
    ensure!(
        major(&ctx, &serving).await? == from,
        "{serving} does not run {from} after the refusal"
    );
    let pg = ctx.postgresql_in(&ctx.ns, NAME).await?;
    ensure!(
        pg.status
            .as_ref()
            .and_then(|s| s.upgrade.as_ref())
            .is_none(),
        "an upgrade started again by itself after the refusal"
    );
    // The way back was taken before the database stopped, and was complete by then.
    let before_backup = format!("{NAME}-before-v{to_version}");
    let taken = ctx.backups_in(&ctx.ns).get(&before_backup).await?;
    let phase = taken.status.as_ref().and_then(|s| s.phase);
    let of = (taken.status.as_ref())
        .and_then(|s| s.physical.as_ref())
        .map(|p| p.system_identifier.clone());
    ensure!(
        phase == Some(BackupPhase::Completed) && of.as_deref() == Some(system_before.as_str()),
        "base backup {before_backup} before the stop: {phase:?} of system {of:?}, not a \
         completed one of {system_before}"
    );
    say(format!(
        "refused, and writes taken again on {from}: {failed}; {before_backup} of the old \
         system taken before the stop"
    ));

    // 2. Fixed, and asked again (the version back, then up): upgraded in place.
    pod_sql(&ctx, &serving, "DROP EXTENSION adminpack").await?;
    ctx.merge_patch_postgresql_in(&ctx.ns, NAME, back).await?;
    let raised = Instant::now();
    ctx.merge_patch_postgresql_in(&ctx.ns, NAME, serde_json::json!({"spec": raise}))
        .await?;
    let upgraded = ended(&ctx, NAME, "Upgraded", Duration::from_secs(900)).await?;
    ctx.wait_ready(&[NAME]).await?;
    let took = raised.elapsed();
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let acks = writer.stop();

    let primary = current_primary(&ctx, NAME).await?.context("a primary")?;
    let to = major(&ctx, &primary).await?;
    ensure!(to != from, "the primary runs {to}, as before the upgrade");
    every_ack_on(&ctx, &primary, &acks).await?;
    ensure!(
        pod_sql(&ctx, &primary, "SELECT count(*) FROM kept").await? == "1000",
        "kept lost rows"
    );
    // pg_upgrade before 18 carries no statistics, and autovacuum would never analyze a table
    // nothing writes: the primary's manager analyzes every database after the upgrade.
    until(
        "statistics of the unchanged table kept on the new major",
        ctx.timeout(),
        || async {
            let sql = "SELECT count(*) FROM pg_stats WHERE tablename = 'kept'";
            let n = pod_sql(&ctx, &primary, sql).await?;
            Ok(Check::when(
                n != "0",
                format!("{n} columns with statistics"),
            ))
        },
    )
    .await?;
    let streaming = until(
        "a replica streaming the new major",
        ctx.timeout(),
        || async {
            let n = pod_sql(&ctx, &primary, "SELECT count(*) FROM pg_stat_replication").await?;
            Ok(Check::when(n == "1", format!("{n} streaming")))
        },
    )
    .await;
    streaming?;
    let system_after = (ctx.postgresql_in(&ctx.ns, NAME).await?.status)
        .and_then(|s| s.system_identifier)
        .unwrap_or_default();
    ensure!(
        system_after != system_before && !system_after.is_empty(),
        "status.systemIdentifier is {system_after:?} after the upgrade (was {system_before})"
    );
    let after_backup = format!("{NAME}-v{to_version}-base");
    ctx.wait_backup_condition_in(&ctx.ns, &after_backup, "Completed")
        .await?;
    let of = (ctx.backups_in(&ctx.ns).get(&after_backup).await?.status)
        .and_then(|s| s.physical)
        .map(|p| p.system_identifier);
    ensure!(
        of.as_deref() == Some(system_after.as_str()),
        "{after_backup} is of system {of:?}, not the upgraded {system_after}"
    );
    let gap = write_gap(&acks, raised).unwrap_or_default();
    say(format!(
        "{from} -> {to} in place, 2 instances: {upgraded}; raised to Ready on {to} {:.0} s, the \
         writer's longest gap {:.1} s (the downtime); {} acknowledged rows, 0 lost; the replica \
         cloned and streaming",
        took.as_secs_f64(),
        gap.as_secs_f64(),
        acks.len()
    ));
    Ok(())
}
