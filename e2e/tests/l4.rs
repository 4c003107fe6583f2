//! L4: real bytes through the Jobs the operator generates (TUSK_E2E_L4=1: a real PostgreSQL
//! per database pod, MinIO, and every Job run with the real backup-agent).

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use tusk_e2e::backups::unix_seconds;
use tusk_e2e::manifests::{S3Backup, cluster};
use tusk_e2e::verification::passed_with_seed;
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};

/// The scheduled-backup Job (created from the operator's CronJob as the scheduler would) writes
/// a complete backup; a restore Job built from the same template (args `restore`, pointed at a
/// second cluster) restores it, and every table matches. Needs nothing beyond the CronJob.
#[scenario]
async fn l4_cronjob_backup_restore(ctx: Ctx) -> Result {
    ctx.require_l4()?;
    let (ns, src, dst) = (ctx.ns.clone(), "l4src", "l4dst");
    let job = format!("l4src-manual-{}", unix_seconds());
    ctx.apply(&cluster(src, Some(&S3Backup::nightly()))).await?;
    // A restore Job of one's own logs in as the superuser over the network: the spec must
    // allow it (the operator's own restores get a certificate instead).
    let dst_spec = cluster(dst, None) + "  superuserAccess: true\n";
    ctx.apply(&dst_spec).await?;
    ctx.wait_ready(&[src, dst]).await?;
    ctx.wait_sql(src).await?;
    ctx.seed(src, "app", "app").await?;
    say(format!("seeded {ns}/{src} database app (as role app)"));
    let cronjobs: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ns);
    let cronjob = format!("{src}-backup");
    until(format!("CronJob {ns}/{cronjob}"), ctx.timeout(), || async {
        Ok(Check::when(
            cronjobs.get_opt(&cronjob).await?.is_some(),
            "absent",
        ))
    })
    .await?;
    ctx.create_job_from_cronjob(&cronjob, &job).await?;
    ctx.wait_job_complete(&job).await?;
    say(format!(
        "backup Job {job} (from cronjob/{cronjob}) Complete"
    ));
    if ctx.platform.can_list_bucket() {
        let prefix = format!("e2e/{ns}/{src}/{job}/");
        let keys = ctx.platform.bucket_keys(&prefix).await?;
        ensure!(
            keys.iter()
                .any(|k| k.ends_with(&format!("/{job}/manifest.json"))),
            "no manifest.json under {prefix}: {keys:?}"
        );
        let short: Vec<&str> = keys.iter().map(|k| k.trim_start_matches(&prefix)).collect();
        say(format!("in the bucket: {}", short.join(" ")));
    } else {
        say("(this platform cannot list the store; the Job's success stands for the manifest)");
    }
    let cron = serde_json::to_value(cronjobs.get(&cronjob).await?)?;
    let restore: Job = serde_json::from_value(restore_job(&cron, &ns, src, dst, &job)?)?;
    ctx.jobs_in(&ns)
        .create(&PostParams::default(), &restore)
        .await?;
    ctx.wait_job_complete(&format!("{dst}-restore")).await?;
    say(format!(
        "restore Job {dst}-restore (agent `restore`, TUSK_CLUSTER={src}, backup {job}) Complete"
    ));
    ctx.assert_same_data(src, dst, "app").await
}

/// A restore Job the way the operator builds one: the backup Job's pod template, agent command
/// `restore` keeping the target's own roles, connected to the target cluster with its own
/// superuser (its password; the template's client certificate is the target's replication
/// role's, which the superuser's scram line does not ask for).
fn restore_job(cron: &Value, ns: &str, src: &str, dst: &str, backup: &str) -> Result<Value> {
    let template = &cron["spec"]["jobTemplate"];
    let mut labels = template["metadata"]["labels"].clone();
    let labels_map = labels
        .as_object_mut()
        .context("the job template has no labels")?;
    labels_map.insert("tusk.dev/cluster".into(), dst.into());
    labels_map.insert("app.kubernetes.io/instance".into(), dst.into());
    labels_map.insert("app.kubernetes.io/component".into(), "restore".into());
    let mut spec = template["spec"].clone();
    let pod = &mut spec["template"];
    pod["metadata"]["labels"] = labels.clone();
    // The target's CA verifies the target's server (the template mounts the source's).
    for volume in pod["spec"]["volumes"].as_array_mut().into_iter().flatten() {
        if volume["secret"]["secretName"] == format!("{src}-server-tls") {
            volume["secret"]["secretName"] = format!("{dst}-server-tls").into();
        }
    }
    let container = &mut pod["spec"]["containers"][0];
    container["args"] = json!([
        "restore",
        "--preserve-role",
        "app",
        "--preserve-role",
        "tusk_replication",
        "--preserve-role",
        "tusk_rewind",
        "--preserve-role",
        "tusk_backup"
    ]);
    let mut env = Vec::new();
    for mut var in container["env"].as_array().cloned().unwrap_or_default() {
        match var["name"].as_str().unwrap_or_default() {
            "PGHOST" => var["value"] = format!("{dst}-rw.{ns}.svc").into(),
            // The template logs in as tusk_backup with the replication role's password.
            name @ ("PGUSER" | "PGPASSWORD") => {
                let key = if name == "PGUSER" {
                    "username"
                } else {
                    "password"
                };
                var = json!({"name": name, "valueFrom": {"secretKeyRef": {
                    "name": format!("{dst}-superuser"), "key": key}}});
            }
            "TUSK_BACKUP_ID" => var = json!({"name": "TUSK_BACKUP_ID", "value": backup}),
            "TUSK_COMPRESSION" => continue,
            _ => {}
        }
        env.push(var);
    }
    env.push(json!({"name": "TUSK_WORK_DIR", "value": "/tmp"})); // the emptyDir of the template
    container["env"] = Value::Array(env);
    spec["backoffLimit"] = 0.into();
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": format!("{dst}-restore"), "namespace": ns, "labels": labels},
        "spec": spec,
    }))
}

/// The user's flow with the samples: an on-demand Backup CR, proven by the sample's scheduled
/// verification, then a new cluster restored from it, and the application owner logging into
/// the copy with its own password.
#[scenario]
async fn l4_backup_restore_samples(ctx: Ctx) -> Result {
    ctx.require_l4()?;
    let samples = ctx.settings.repo.join("samples");
    if !samples.join("backup.yaml").exists() || !samples.join("postgresql-restore.yaml").exists() {
        tusk_e2e::fail!("samples/backup.yaml or samples/postgresql-restore.yaml is missing");
    }
    let ns = ctx.ns.clone();
    ctx.apply_sample("postgresql-s3-minio.yaml").await?;
    ctx.wait_ready(&["shop"]).await?;
    ctx.wait_sql("shop").await?;
    ctx.seed("shop", "shop", "shop").await?;
    say(format!("seeded {ns}/shop database shop (as role shop)"));
    ctx.apply_sample("backup.yaml").await?;
    wait_backup_completed(&ctx, "shop-manual").await?;
    let status = ctx
        .backups_in(&ns)
        .get("shop-manual")
        .await?
        .status
        .unwrap_or_default();
    say(format!(
        "Backup shop-manual Completed: {} {} bytes",
        status.location.unwrap_or_default(),
        status.size_bytes.unwrap_or_default()
    ));
    // The sample verifies on a schedule; the first run proves the newest backup at once.
    let proof = ctx
        .wait_backup_verified_in(&ns, "shop", "shop-manual")
        .await?;
    say(format!(
        "scheduled verification of shop-manual: {}; shop BackupVerified=True",
        passed_with_seed(&proof)?
    ));
    ctx.apply_sample("postgresql-restore.yaml").await?;
    ctx.wait_condition_in(&ns, "shop-restored", "Restored", "True")
        .await?;
    ctx.wait_ready(&["shop-restored"]).await?;
    say("shop-restored Restored and Ready");
    ctx.wait_sql("shop-restored").await?;
    ctx.assert_same_data("shop", "shop-restored", "shop")
        .await?;
    // The owner's role came back from the backup, but with shop-restored's own password.
    let app = ctx
        .platform
        .app_sql(
            &ns,
            "shop-restored",
            "SELECT current_user || '|' || count(*) FROM orders",
        )
        .await
        .context(
            "the application owner cannot use shop-restored with the password in shop-restored-app",
        )?;
    ensure!(
        app.trim() == "shop|20000",
        "as the app owner: '{}', want 'shop|20000'",
        app.trim()
    );
    say(
        "the app owner logs into shop-restored with shop-restored-app's password and reads its 20000 orders",
    );
    Ok(())
}

async fn wait_backup_completed(ctx: &Ctx, name: &str) -> Result {
    until(
        format!("Backup {}/{name} phase Completed", ctx.ns),
        ctx.timeout(),
        || async {
            let backup = ctx.backups_in(&ctx.ns).get(name).await?;
            Ok(Check::when(
                backup.phase() == tusk::crd::BackupPhase::Completed,
                format!("{:?}", backup.status),
            ))
        },
    )
    .await
}
