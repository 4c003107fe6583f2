//! The bucket-cleaning finalizer: `onDelete: Delete` empties exactly the deleted cluster's
//! prefix, `Retain` keeps everything, and an unreachable store neither blocks the namespace
//! forever nor loses the escape hatch.

use tusk::crd::BackupPhase;
use tusk_e2e::cluster::{condition, conditions};
use tusk_e2e::manifests::{S3Backup, cluster};
use tusk_e2e::{Ctx, Result, ensure, say, scenario};

/// onDelete: Delete empties exactly <path>/<ns>/<cluster>/: a cluster named db2 and a cluster
/// db in another namespace keep their objects, and only the deleted cluster's Backups go.
#[scenario]
async fn backup_delete_empties_only_its_prefix(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let (ns, other) = (ctx.ns.clone(), ctx.extra_namespace().await?);
    ctx.lifecycle_cluster_in(&ns, "db", 5, "Delete").await?;
    ctx.lifecycle_cluster_in(&ns, "db2", 5, "Delete").await?;
    ctx.lifecycle_cluster_in(&other, "db", 5, "Delete").await?;
    ctx.wait_ready_in(&ns, &["db", "db2"]).await?;
    ctx.wait_ready_in(&other, &["db"]).await?;
    ctx.take_backup_in(&ns, "db", "d1").await?;
    ctx.take_backup_in(&ns, "db2", "d2").await?;
    ctx.take_backup_in(&other, "db", "d3").await?;
    let checked: Result = async {
        ctx.delete_postgresql_and_wait_in(&ns, "db").await?;
        let left = ctx.lifecycle_keys(&ns, "db").await?;
        ensure!(left.is_empty(), "lifecycle/{ns}/db/ still holds: {left:?}");
        ensure!(!ctx.lifecycle_keys(&ns, "db2").await?.is_empty(), "lifecycle/{ns}/db2/ was emptied too");
        ensure!(!ctx.lifecycle_keys(&other, "db").await?.is_empty(), "lifecycle/{other}/db/ was emptied too");
        ensure!(ctx.backups_in(&ns).get_opt("d1").await?.is_none(), "the deleted cluster's Backup is still there");
        ensure!(ctx.backups_in(&ns).get_opt("d2").await?.is_some(), "db2's Backup was deleted");
        say(format!("deleted lifecycle/{ns}/db/ only; {ns}/db2 and {other}/db keep their objects and Backups"));
        Ok(())
    }
    .await;
    // A namespace deletion may remove the credentials Secret before the cluster: Retain first.
    let retain = serde_json::json!({"spec": {"backup": {"onDelete": "Retain"}}});
    ctx.merge_patch_postgresql_in(&ns, "db2", retain.clone())
        .await?;
    ctx.merge_patch_postgresql_in(&other, "db", retain).await?;
    checked
}

/// onDelete: Retain (the default): the cluster goes at once; objects and Backups stay, and the
/// Backup is still restorable.
#[scenario]
async fn backup_retain_keeps_everything(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let (ns, name) = (ctx.ns.clone(), "keep");
    ctx.lifecycle_cluster_in(&ns, "db", 5, "Retain").await?;
    ctx.wait_ready(&["db"]).await?;
    ctx.take_backup_in(&ns, "db", name).await?;
    ctx.delete_postgresql_and_wait_in(&ns, "db").await?;
    let keys = ctx.lifecycle_keys(&ns, "db").await?;
    ensure!(
        keys.iter()
            .any(|k| k.ends_with(&format!("/{name}/manifest.json"))),
        "Retain deleted objects: {keys:?}"
    );
    let phase = ctx.backups_in(&ns).get(name).await?.phase();
    ensure!(
        phase == BackupPhase::Completed,
        "Backup {name} is {phase:?}"
    );
    say(format!("db deleted; its objects and Backup {name} remain"));
    Ok(())
}

/// A store that cannot be reached blocks deletion with a condition; switching to Retain
/// releases the cluster.
#[scenario]
async fn backup_unreachable_store_on_delete(ctx: Ctx) -> Result {
    ctx.require_l4()?;
    let ns = ctx.ns.clone();
    let unreachable = S3Backup::lifecycle(5, "Delete", "http://127.0.0.1:9");
    ctx.apply(&cluster("db", Some(&unreachable))).await?;
    ctx.wait_ready(&["db"]).await?;
    ctx.postgresqls_in(&ns)
        .delete("db", &Default::default())
        .await?;
    ctx.wait_condition_in(&ns, "db", "Cleanup", "False").await?;
    let pg = ctx.postgresql_in(&ns, "db").await?;
    let reason = condition(conditions(&pg), "Cleanup")
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    ensure!(reason == "StoreUnreachable", "Cleanup reason is '{reason}'");
    ensure!(
        ctx.postgresqls_in(&ns).get_opt("db").await?.is_some(),
        "the cluster was released without emptying its prefix"
    );
    ctx.release_with_retain_in(&ns, &["db"]).await?;
    say("Cleanup=False/StoreUnreachable while the store was down; released by onDelete: Retain");
    Ok(())
}
