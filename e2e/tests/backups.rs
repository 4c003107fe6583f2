//! The backup lifecycle driven by the operator (L4: every Job it generates is run by the real
//! backup-agent): on-demand and scheduled Backups and retention. The operator reads manifests
//! itself, so the destination's endpoint is one it reaches (E2E_S3_ENDPOINT; locally the local
//! MinIO). Restores are in restores.rs, the bucket-cleaning finalizer in bucket_cleanup.rs.

use tusk_e2e::backups::unix_seconds;
use tusk_e2e::{Check, Ctx, Kind, Obj, Result, ensure, say, scenario, until};

/// An on-demand Backup: Job owned by the Backup, Completed only with its manifest in the
/// bucket, its status complete, and the cluster's status pointing at it.
#[scenario]
async fn backup_on_demand(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let (ns, name) = (ctx.ns.clone(), "manual");
    let took = ctx.backed_up_lifecycle_db(name).await?;
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
    let keys = ctx.lifecycle_keys(&ns, "db").await?;
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
    ctx.wait_status_in(&ns, "db", format!("lastSuccessfulBackup {name}"), |s| {
        let last = s.last_successful_backup.as_ref().map(|b| b.name.as_str());
        (last == Some(name), format!("{last:?}"))
    })
    .await?;
    ctx.wait_condition_in(&ns, "db", "LastBackupSucceeded", "True")
        .await?;
    say(format!(
        "status: {} bytes, postgres {version}; cluster LAST BACKUP = {name}",
        status.size_bytes.unwrap_or_default()
    ));
    Ok(())
}

/// A run of the backup CronJob (a Job created from it, as the CronJob controller would) is
/// recorded as a Backup, Completed from its manifest, and the Job is marked as recorded.
#[scenario]
async fn backup_scheduled_run_recorded(ctx: Ctx) -> Result {
    ctx.require_l4()?;
    let ns = ctx.ns.clone();
    ctx.serving_lifecycle_db(5, "Retain").await?;
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
}

/// keep: 1 — after the second backup completes, the first one's objects and then its Backup
/// go; the newest stays.
#[scenario]
async fn backup_retention(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let (ns, first, second) = (ctx.ns.clone(), "r1", "r2");
    ctx.serving_lifecycle_db(1, "Retain").await?;
    ctx.take_backup_in(&ns, "db", first).await?;
    ctx.take_backup_in(&ns, "db", second).await?;
    ctx.wait_backup_gone_in(&ns, first, "retention").await?;
    let keys = ctx.lifecycle_keys(&ns, "db").await?;
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
}
