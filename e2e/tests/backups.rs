//! The backup lifecycle driven by the operator (L4: every Job it generates is run by the real
//! backup-agent): on-demand and scheduled Backups, retention, restore into a new cluster, and
//! the bucket-cleaning finalizer. The operator reads manifests and empties prefixes itself, so
//! the destination's endpoint is one it reaches (E2E_S3_ENDPOINT; locally the local MinIO).

use tusk::crd::BackupPhase;
use tusk_e2e::backups::unix_seconds;
use tusk_e2e::cluster::{condition, conditions, describe};
use tusk_e2e::manifests::{S3Backup, backup, cluster, restored_cluster};
use tusk_e2e::{Check, Ctx, Kind, Obj, Result, ensure, fail, say, until, with_temp_ns};

/// A cluster with S3 backups under path `lifecycle`.
async fn backup_cluster_in(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    keep: u32,
    on_delete: &'static str,
) -> Result {
    let backup = S3Backup::lifecycle(keep, on_delete, &ctx.settings.s3_endpoint.clone());
    ctx.apply_in(ns, &cluster(name, Some(&backup)))
        .await
        .map(drop)
}

async fn lifecycle_keys(ctx: &Ctx, ns: &str, cluster: &str) -> Result<Vec<String>> {
    ctx.prefix_keys_in("lifecycle", ns, cluster).await
}

/// An on-demand Backup: Job owned by the Backup, Completed only with its manifest in the
/// bucket, its status complete, and the cluster's status pointing at it.
#[tokio::test]
#[ignore = "needs a cluster: scripts/e2e.sh"]
async fn backup_on_demand() {
    with_temp_ns("backup_on_demand", |ctx| async move {
        ctx.require_l4()?;
        ctx.require_bucket()?;
        let (ns, name) = (ctx.ns.clone(), "manual");
        backup_cluster_in(&ctx, &ns, "db", 5, "Retain").await?;
        ctx.wait_ready(&["db"]).await?;
        ctx.wait_sql("db").await?;
        ctx.seed("db", "app", "app").await?;
        let took = ctx.take_backup_in(&ns, "db", name).await?;
        say(format!(
            "apply of Backup {name} -> Completed in {:.1}s",
            took.as_secs_f64()
        ));
        let job = ctx.jobs_in(&ns).get(name).await?;
        let owner = job
            .metadata
            .owner_references
            .unwrap_or_default()
            .first()
            .map(|o| o.kind.clone());
        ensure!(
            owner.as_deref() == Some("Backup"),
            "job/{name} is owned by {owner:?}, not its Backup"
        );
        let keys = lifecycle_keys(&ctx, &ns, "db").await?;
        let manifest = format!("lifecycle/{ns}/db/{name}/manifest.json");
        ensure!(
            keys.contains(&manifest),
            "no manifest for {name} in the bucket: {keys:?}"
        );
        let status = ctx
            .backups_in(&ns)
            .get(name)
            .await?
            .status
            .unwrap_or_default();
        let location = format!("s3://tusk-backups/lifecycle/{ns}/db/{name}/");
        ensure!(
            status.location.as_deref() == Some(location.as_str()),
            "location: {:?}",
            status.location
        );
        ensure!(
            status.size_bytes.unwrap_or_default() > 0,
            "sizeBytes is not positive: {:?}",
            status.size_bytes
        );
        let sha = status.sha256.clone().unwrap_or_default();
        ensure!(
            sha.len() == 64
                && sha
                    .chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "sha256 missing: {sha:?}"
        );
        let version = status.postgres_version.clone().unwrap_or_default();
        ensure!(!version.is_empty(), "postgresVersion missing");
        until(
            format!("lastSuccessfulBackup of {ns}/db to be {name}"),
            ctx.timeout(),
            || async {
                let last = ctx
                    .postgresql_in(&ns, "db")
                    .await?
                    .status
                    .and_then(|s| s.last_successful_backup);
                let last = last.map(|b| b.name).unwrap_or_default();
                Ok(Check::when(last == name, format!("'{last}'")))
            },
        )
        .await?;
        ctx.wait_condition_in(&ns, "db", "LastBackupSucceeded", "True")
            .await?;
        say(format!(
            "status: {} bytes, postgres {version}; cluster LAST BACKUP = {name}",
            status.size_bytes.unwrap_or_default()
        ));
        Ok(())
    })
    .await;
}

/// A run of the backup CronJob (a Job created from it, as the CronJob controller would) is
/// recorded as a Backup, Completed from its manifest, and the Job is marked as recorded.
#[tokio::test]
#[ignore = "needs a cluster: scripts/e2e.sh"]
async fn backup_scheduled_run_recorded() {
    with_temp_ns("backup_scheduled_run_recorded", |ctx| async move {
        ctx.require_l4()?;
        let ns = ctx.ns.clone();
        backup_cluster_in(&ctx, &ns, "db", 5, "Retain").await?;
        ctx.wait_ready(&["db"]).await?;
        ctx.wait_sql("db").await?;
        let cronjob = Obj::new(Kind::CronJob, "db-backup");
        until(format!("{ns}/{cronjob}"), ctx.timeout(), || async {
            Ok(Check::when(ctx.exists(&cronjob).await?, "absent"))
        })
        .await?;
        let job = format!("db-backup-{}", unix_seconds());
        ctx.create_job_from_cronjob("db-backup", &job).await?;
        until(
            format!("Backup {ns}/{job} recording the scheduled run"),
            ctx.timeout(),
            || async {
                Ok(Check::when(
                    ctx.backups_in(&ns).get_opt(&job).await?.is_some(),
                    "absent",
                ))
            },
        )
        .await?;
        ctx.wait_backup_condition_in(&ns, &job, "Completed").await?;
        let recorded = ctx.backups_in(&ns).get(&job).await?;
        let scheduled = recorded
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get("tusk.dev/scheduled")
            .cloned();
        ensure!(
            scheduled.as_deref() == Some("true"),
            "label tusk.dev/scheduled is {scheduled:?}"
        );
        let annotations = ctx
            .jobs_in(&ns)
            .get(&job)
            .await?
            .metadata
            .annotations
            .unwrap_or_default();
        let recorded_as = annotations.get("tusk.dev/recorded-as");
        ensure!(
            recorded_as == Some(&job),
            "annotation tusk.dev/recorded-as is {recorded_as:?}"
        );
        ensure!(
            recorded
                .metadata
                .owner_references
                .unwrap_or_default()
                .is_empty(),
            "a recorded Backup must not be owned by its cluster"
        );
        let location = recorded.status.and_then(|s| s.location).unwrap_or_default();
        say(format!(
            "scheduled Job {job} recorded as Backup {job}: {location}"
        ));
        Ok(())
    })
    .await;
}

/// keep: 1 — after the second backup completes, the first one's objects and then its Backup
/// go; the newest stays.
#[tokio::test]
#[ignore = "needs a cluster: scripts/e2e.sh"]
async fn backup_retention() {
    with_temp_ns("backup_retention", |ctx| async move {
        ctx.require_l4()?;
        ctx.require_bucket()?;
        let (ns, first, second) = (ctx.ns.clone(), "r1", "r2");
        backup_cluster_in(&ctx, &ns, "db", 1, "Retain").await?;
        ctx.wait_ready(&["db"]).await?;
        ctx.wait_sql("db").await?;
        ctx.take_backup_in(&ns, "db", first).await?;
        ctx.take_backup_in(&ns, "db", second).await?;
        until(
            format!("Backup {ns}/{first} to be deleted by retention"),
            ctx.timeout(),
            || async {
                Ok(Check::when(
                    ctx.backups_in(&ns).get_opt(first).await?.is_none(),
                    "present",
                ))
            },
        )
        .await?;
        let keys = lifecycle_keys(&ctx, &ns, "db").await?;
        ensure!(
            !keys.iter().any(|k| k.contains(&format!("/{first}/"))),
            "objects of {first} are still in the bucket: {keys:?}"
        );
        ensure!(
            keys.iter()
                .any(|k| k.ends_with(&format!("/{second}/manifest.json"))),
            "the newest backup {second} is gone: {keys:?}"
        );
        ensure!(
            ctx.backups_in(&ns).get_opt(second).await?.is_some(),
            "Backup {second} was deleted"
        );
        say(format!(
            "keep: 1 deleted {first} (objects, then the Backup) and kept {second}"
        ));
        Ok(())
    })
    .await;
}

/// A new cluster restored from a Backup: Restored before Ready, restoredFrom recorded, and
/// every table equal to the source's by per-table checksums.
#[tokio::test]
#[ignore = "needs a cluster: scripts/e2e.sh"]
async fn backup_restore_into_new_cluster() {
    with_temp_ns("backup_restore_into_new_cluster", |ctx| async move {
        ctx.require_l4()?;
        let (ns, name) = (ctx.ns.clone(), "src");
        backup_cluster_in(&ctx, &ns, "db", 5, "Retain").await?;
        ctx.wait_ready(&["db"]).await?;
        ctx.wait_sql("db").await?;
        ctx.seed("db", "app", "app").await?;
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
        until(
            "copy to observe its new generation",
            ctx.timeout(),
            || async {
                let observed = ctx
                    .postgresql_in(&ns, "copy")
                    .await?
                    .status
                    .and_then(|s| s.observed_generation);
                Ok(Check::when(observed == Some(2), format!("{observed:?}")))
            },
        )
        .await?;
        ensure!(
            !ctx.exists(&restore_job).await?,
            "the restore Job was re-created after the cluster was restored"
        );
        Ok(())
    })
    .await;
}

/// A restore from a backup whose dump was altered by one bit: refused before anything is
/// applied, and the agent's own reason (the sha256 mismatch, from its termination message) is
/// what the cluster's Restored condition and its Event say.
#[tokio::test]
#[ignore = "needs a cluster: scripts/e2e.sh"]
async fn backup_restore_from_altered_dump() {
    with_temp_ns("backup_restore_from_altered_dump", |ctx| async move {
        ctx.require_l4()?;
        ctx.require_bucket()?;
        let (ns, name) = (ctx.ns.clone(), "src");
        backup_cluster_in(&ctx, &ns, "db", 5, "Retain").await?;
        ctx.wait_ready(&["db"]).await?;
        ctx.wait_sql("db").await?;
        ctx.seed("db", "app", "app").await?;
        ctx.take_backup_in(&ns, "db", name).await?;
        let keys = lifecycle_keys(&ctx, &ns, "db").await?;
        let dump_prefix = format!("lifecycle/{ns}/db/{name}/db-app.");
        let Some(dump) = keys.iter().find(|k| k.starts_with(&dump_prefix)) else {
            fail!("no dump of database app under {dump_prefix}: {keys:?}");
        };
        ctx.alter_object(dump).await?;
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
    })
    .await;
}

/// onDelete: Delete empties exactly <path>/<ns>/<cluster>/: a cluster named db2 and a cluster
/// db in another namespace keep their objects, and only the deleted cluster's Backups go.
#[tokio::test]
#[ignore = "needs a cluster: scripts/e2e.sh"]
async fn backup_delete_empties_only_its_prefix() {
    with_temp_ns("backup_delete_empties_only_its_prefix", |ctx| async move {
        ctx.require_l4()?;
        ctx.require_bucket()?;
        let (ns, other) = (ctx.ns.clone(), ctx.extra_namespace().await?);
        backup_cluster_in(&ctx, &ns, "db", 5, "Delete").await?;
        backup_cluster_in(&ctx, &ns, "db2", 5, "Delete").await?;
        backup_cluster_in(&ctx, &other, "db", 5, "Delete").await?;
        ctx.wait_ready_in(&ns, &["db", "db2"]).await?;
        ctx.wait_ready_in(&other, &["db"]).await?;
        ctx.take_backup_in(&ns, "db", "d1").await?;
        ctx.take_backup_in(&ns, "db2", "d2").await?;
        ctx.take_backup_in(&other, "db", "d3").await?;
        let checked: Result = async {
            ctx.delete_postgresql_and_wait_in(&ns, "db").await?;
            let left = lifecycle_keys(&ctx, &ns, "db").await?;
            ensure!(left.is_empty(), "lifecycle/{ns}/db/ still holds: {left:?}");
            ensure!(!lifecycle_keys(&ctx, &ns, "db2").await?.is_empty(), "lifecycle/{ns}/db2/ was emptied too");
            ensure!(!lifecycle_keys(&ctx, &other, "db").await?.is_empty(), "lifecycle/{other}/db/ was emptied too");
            ensure!(ctx.backups_in(&ns).get_opt("d1").await?.is_none(), "the deleted cluster's Backup is still there");
            ensure!(ctx.backups_in(&ns).get_opt("d2").await?.is_some(), "db2's Backup was deleted");
            say(format!("deleted lifecycle/{ns}/db/ only; {ns}/db2 and {other}/db keep their objects and Backups"));
            Ok(())
        }
        .await;
        // A namespace deletion may remove the credentials Secret before the cluster: Retain first.
        let retain = serde_json::json!({"spec": {"backup": {"onDelete": "Retain"}}});
        ctx.merge_patch_postgresql_in(&ns, "db2", retain.clone()).await?;
        ctx.merge_patch_postgresql_in(&other, "db", retain).await?;
        checked
    })
    .await;
}

/// onDelete: Retain (the default): the cluster goes at once; objects and Backups stay, and the
/// Backup is still restorable.
#[tokio::test]
#[ignore = "needs a cluster: scripts/e2e.sh"]
async fn backup_retain_keeps_everything() {
    with_temp_ns("backup_retain_keeps_everything", |ctx| async move {
        ctx.require_l4()?;
        ctx.require_bucket()?;
        let (ns, name) = (ctx.ns.clone(), "keep");
        backup_cluster_in(&ctx, &ns, "db", 5, "Retain").await?;
        ctx.wait_ready(&["db"]).await?;
        ctx.take_backup_in(&ns, "db", name).await?;
        ctx.delete_postgresql_and_wait_in(&ns, "db").await?;
        let keys = lifecycle_keys(&ctx, &ns, "db").await?;
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
    })
    .await;
}

/// A store that cannot be reached blocks deletion with a condition; switching to Retain
/// releases the cluster.
#[tokio::test]
#[ignore = "needs a cluster: scripts/e2e.sh"]
async fn backup_unreachable_store_on_delete() {
    with_temp_ns("backup_unreachable_store_on_delete", |ctx| async move {
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
        ctx.merge_patch_postgresql_in(
            &ns,
            "db",
            serde_json::json!({"spec": {"backup": {"onDelete": "Retain"}}}),
        )
        .await?;
        until(
            "switching to Retain to release the cluster",
            ctx.timeout(),
            || async {
                Ok(Check::when(
                    ctx.postgresqls_in(&ns).get_opt("db").await?.is_none(),
                    "still there",
                ))
            },
        )
        .await?;
        say(
            "Cleanup=False/StoreUnreachable while the store was down; released by onDelete: Retain",
        );
        Ok(())
    })
    .await;
}
