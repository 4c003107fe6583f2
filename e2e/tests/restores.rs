//! Restores driven by the operator (L4: the real backup-agent runs the restore Jobs): a Backup
//! restored into a new cluster table by table, and a dump altered in the bucket refused with
//! the agent's own reason in the cluster's status.

use tusk_e2e::bucket::{APP_DUMP, Damage};
use tusk_e2e::cluster::{condition, conditions, describe};
use tusk_e2e::manifests::{backup, restored_cluster};
use tusk_e2e::{Check, Ctx, Kind, Obj, Result, ensure, say, scenario, until};

/// A new cluster restored from a Backup: Restored before Ready, restoredFrom recorded, and
/// every table equal to the source's by per-table checksums.
#[scenario]
async fn backup_restore_into_new_cluster(ctx: Ctx) -> Result {
    ctx.require_l4()?;
    let (ns, name) = (ctx.ns.clone(), "src");
    ctx.seeded_lifecycle_db().await?;
    // The Backup and the cluster restoring from it in one apply: the restore waits for the
    // Backup and starts when it completes (its events wake the waiting cluster).
    ctx.apply(&format!(
        "{}---\n{}",
        backup(name, "db"),
        restored_cluster("copy", name)
    ))
    .await?;
    ctx.wait_condition_in(&ns, "copy", "Restored", "True")
        .await?;
    ctx.wait_ready(&["copy"]).await?;
    let restored = ctx
        .postgresql_in(&ns, "copy")
        .await?
        .status
        .and_then(|s| s.restored_from);
    let id = restored.map(|r| r.backup_id).unwrap_or_default();
    ensure!(id == name, "restoredFrom.backupId is '{id}', want {name}");
    ctx.wait_sql("copy").await?;
    ctx.assert_same_data("db", "copy", "app").await?;
    // Once restored, never again: the Job is not re-created after it is deleted.
    let restore_job = Obj::new(Kind::Job, "copy-restore");
    ctx.delete_and_wait_in(&ns, &restore_job).await?;
    ctx.merge_patch_postgresql_in(
        &ns,
        "copy",
        serde_json::json!({"spec": {"parameters": {"work_mem": "8MB"}}}),
    )
    .await?;
    ctx.wait_status_in(&ns, "copy", "observedGeneration 2", |s| {
        (
            s.observed_generation == Some(2),
            format!("{:?}", s.observed_generation),
        )
    })
    .await?;
    ensure!(
        !ctx.exists(&restore_job).await?,
        "the restore Job was re-created after the cluster was restored"
    );
    Ok(())
}

/// A restore from a backup whose dump was altered by one bit: refused before anything is
/// applied, and the agent's own reason (the sha256 mismatch, from its termination message) is
/// what the cluster's Restored condition and its Event say.
#[scenario]
async fn backup_restore_from_altered_dump(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let (ns, name) = (ctx.ns.clone(), "src");
    ctx.backed_up_lifecycle_db(name).await?;
    let dump = ctx
        .damage_backup_in(&ns, name, APP_DUMP, Damage::FlipBit)
        .await?;
    ctx.apply(&restored_cluster("copy", name)).await?;
    let message = until(
        format!("{ns}/copy Restored=False/RestoreFailed"),
        ctx.timeout(),
        || async {
            let pg = ctx.postgresql_in(&ns, "copy").await?;
            let restored = condition(conditions(&pg), "Restored")
                .filter(|c| c.reason == "RestoreFailed")
                .map(|c| c.message.clone());
            Ok(match restored {
                Some(message) => Check::Done(message),
                None => Check::Pending(describe(conditions(&pg))),
            })
        },
    )
    .await?;
    let reason = format!("integrity check failed: {dump}: sha256 ");
    ensure!(
        message.starts_with(&format!("restore Job copy-restore failed: {reason}"))
            && message.contains("differs from the manifest's")
            && message.contains("(exit code 5)"),
        "the Restored condition does not carry the agent's reason: {message}"
    );
    let tables = ctx
        .db_sql(
            "copy",
            "app",
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
        )
        .await?;
    ensure!(
        tables.trim() == "0",
        "the target is not empty: {tables} tables"
    );
    say(format!("Restored=False: {message}"));
    Ok(())
}
