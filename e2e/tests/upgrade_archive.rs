//! An online upgrade of a cluster that archives WAL, as `docs/src/cluster/upgrades.md`
//! ("Backups across an upgrade") promises it: the old set outlives `keepOldForSeconds` until
//! the base backup of the new major the operator asks for (`<name>-v<major>-base`) completed —
//! a backup of the new system identifier; a point-in-time restore to a time before the
//! upgrade brings the old major back with exactly the rows committed by then; and a logical
//! backup of the upgraded cluster is taken and verified by the new major's own programs (the
//! agent runs inside the cluster's image).

use std::time::Instant;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::Api;
use tusk::crd::{BackupPhase, VerificationPhase};
use tusk_e2e::cluster::{condition, conditions};
use tusk_e2e::manifests::{archived, backup, physical_backup, point_in_time};
use tusk_e2e::replication::{Writer, current_primary, rows, time_between_rows};
use tusk_e2e::upgrades::{ended, major, majors};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};

fn spec(version: &str) -> String {
    format!(
        "apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {{name: arc}}
spec:
  version: \"{version}\"
  instances: 2
  storage: {{size: 1Gi}}
  parameters: {{wal_level: logical}}
  upgrade: {{keepOldForSeconds: 5}}
"
    )
}

/// The system identifier a Backup's base backup belongs to, once Completed.
async fn backup_system(ctx: &Ctx, name: &str) -> Result<String> {
    let backup = ctx.backups_in(&ctx.ns).get(name).await?;
    let status = backup.status.context("a status")?;
    ensure!(
        status.phase == Some(BackupPhase::Completed),
        "Backup {name} is {:?}, not Completed",
        status.phase
    );
    Ok(status
        .physical
        .context("a physical range")?
        .system_identifier)
}

#[scenario]
async fn an_upgraded_archive_is_backed_up_before_the_old_set_goes_and_restores_the_old_major_to_a_time_before(
    ctx: Ctx,
) -> Result {
    ctx.require_real_pods()?;
    ctx.require_l4_bucket()?;
    let (version, raise) = majors(&ctx);
    let endpoint = ctx.settings.s3_endpoint.clone();
    let to = raise["version"].as_str().unwrap_or_default().to_owned();
    let asked = format!("arc-v{to}-base");
    ctx.apply(&archived(&spec(&version), &endpoint)).await?;
    ctx.wait_ready(&["arc"]).await?;
    let old_primary = current_primary(&ctx, "arc").await?.context("a primary")?;
    let from = major(&ctx, &old_primary).await?;
    let writer = Writer::start(&ctx, "arc").await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    ctx.apply(&physical_backup("arc-before", "arc")).await?;
    ctx.wait_backup_condition_in(&ctx.ns, "arc-before", "Completed")
        .await?;
    let old_system = backup_system(&ctx, "arc-before").await?;

    // The target between two reads of the newest row (as `pitr.rs`), then more writes on the
    // old major before the upgrade starts.
    let (before, target, after) = time_between_rows(&ctx, &old_primary).await?;
    writer
        .wait_ack_after(
            Instant::now() + std::time::Duration::from_secs(3),
            ctx.timeout(),
        )
        .await?;

    ctx.merge_patch_postgresql_in(&ctx.ns, "arc", serde_json::json!({"spec": raise}))
        .await?;
    // The old set stays, stopped, while the new major's base backup is not complete.
    let statefulsets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let asked_while_kept = until(
        format!("Backup {asked} asked for"),
        ctx.timeout() * 4,
        || async {
            let exists = ctx.backups_in(&ctx.ns).get_opt(&asked).await?.is_some();
            let pg = ctx.postgresql_in(&ctx.ns, "arc").await?;
            let record = pg.status.and_then(|s| s.upgrade);
            Ok(Check::when(exists, format!("{record:?}")))
        },
    )
    .await;
    let acks = writer.stop();
    asked_while_kept?;
    let old_set = statefulsets.get_opt("arc").await?;
    let completed_already = backup_system(&ctx, &asked).await.is_ok();
    ensure!(
        old_set.is_some() || completed_already,
        "the old set was deleted before {asked} completed"
    );
    let line = ended(&ctx, "arc", "Upgraded", ctx.timeout() * 4).await?;
    let new_system = backup_system(&ctx, &asked).await?;
    let status = ctx.postgresql_in(&ctx.ns, "arc").await?.status;
    let recorded = status.and_then(|s| s.system_identifier);
    ensure!(
        recorded.as_deref() == Some(new_system.as_str()) && new_system != old_system,
        "{asked} is of system {new_system}; the cluster records {recorded:?}, the old system \
         was {old_system}"
    );
    ensure!(
        statefulsets.get_opt("arc").await?.is_none(),
        "the old set is still there after: {line}"
    );
    let new_primary = current_primary(&ctx, "arc").await?.context("a primary")?;
    say(format!(
        "arc upgraded {from} → {}: {} acks; {asked} of the new system {new_system} completed \
         before the old set went ({line})",
        major(&ctx, &new_primary).await?,
        acks.len()
    ));

    // A logical backup of the upgraded cluster, dumped and verified by the new major's own
    // programs.
    ctx.apply(&backup("arc-after", "arc")).await?;
    ctx.wait_backup_condition_in(&ctx.ns, "arc-after", "Completed")
        .await?;
    let verified = ctx.verify_backup("arc-after", "e2e-1").await?;
    ensure!(
        verified.phase == Some(VerificationPhase::Passed),
        "the upgraded cluster's logical backup did not verify: {verified:?}"
    );

    // Back to a time before the upgrade on the new major: refused before a pod starts (a 15
    // data directory does not start on 17), naming the version to use.
    let wrong = "arc-past-on-new";
    let target_yaml = format!("{{time: \"{target}\"}}");
    ctx.apply_next_major(&point_in_time(wrong, 1, "arc", &target_yaml, &endpoint))
        .await?;
    let refusal = until(format!("{wrong} refused"), ctx.timeout(), || async {
        let pg = ctx.postgresql_in(&ctx.ns, wrong).await?;
        let restored = condition(conditions(&pg), "Restored")
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()));
        Ok(match restored {
            Some((status, reason, message))
                if status == "False" && reason == "BaseBackupOfAnotherMajor" =>
            {
                Check::Done(message)
            }
            other => Check::Pending(format!("{other:?}")),
        })
    })
    .await?;
    ensure!(
        refusal.contains(&format!("spec.version \"{from}\"")),
        "the refusal does not name the major to restore with: {refusal}"
    );
    ctx.delete_postgresql_and_wait_in(&ctx.ns, wrong).await?;
    say(format!("{wrong}: {refusal}"));

    // Back to a time before the upgrade: the old system's base backup and WAL, the old major.
    let copy = "arc-past";
    ctx.apply(&point_in_time(copy, 1, "arc", &target_yaml, &endpoint))
        .await?;
    until(
        format!("{copy} restored and Ready"),
        ctx.timeout() * 3,
        || async {
            let pg = ctx.postgresql_in(&ctx.ns, copy).await?;
            let found = |t: &str| condition(conditions(&pg), t).map(|c| c.status.clone());
            let seen = tusk_e2e::cluster::describe(conditions(&pg));
            Ok(Check::when(
                found("Restored").as_deref() == Some("True")
                    && found("Ready").as_deref() == Some("True"),
                seen,
            ))
        },
    )
    .await?;
    let copy_primary = current_primary(&ctx, copy).await?.context("a primary")?;
    let copy_major = major(&ctx, &copy_primary).await?;
    ensure!(
        copy_major == from,
        "the restore before the upgrade runs {copy_major}, not the old major {from}"
    );
    let present = rows(&ctx, copy).await?;
    let newest = present.last().copied().unwrap_or_default();
    ensure!(
        (before..=after).contains(&newest),
        "restored to {target}: the newest row is {newest}, not between {before} and {after}"
    );
    let acked: Vec<i64> = (acks.iter().map(|a| a.n))
        .filter(|n| *n <= newest)
        .collect();
    let missing: Vec<i64> = (acked.iter().copied())
        .filter(|n| present.binary_search(n).is_err())
        .collect();
    ensure!(
        missing.is_empty(),
        "acknowledged rows up to {newest} missing from the restore: {missing:?}"
    );
    say(format!(
        "{copy} restored to {target} (before the upgrade) on {copy_major}: {} rows, up to \
         {newest}",
        present.len()
    ));
    Ok(())
}
