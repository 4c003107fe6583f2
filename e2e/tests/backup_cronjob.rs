//! The backup CronJob follows the cluster's readiness: absent before Ready, suspended while a
//! pod is unready, deleted with spec.backup.

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use tusk_e2e::cluster::condition;
use tusk_e2e::manifests::{S3Backup, cluster};
use tusk_e2e::{Check, Ctx, Kind, Obj, Result, ensure, say, scenario, until};

async fn set_unschedulable(ctx: &Ctx, unschedulable: bool) -> Result {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({"spec": {"unschedulable": unschedulable}});
    for node in nodes.list(&ListParams::default()).await? {
        nodes
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    Ok(())
}

async fn scheduled_reason(ctx: &Ctx, name: &str) -> Result<String> {
    let pg = ctx.postgresql_in(&ctx.ns, name).await?;
    Ok(
        condition(tusk_e2e::cluster::conditions(&pg), "BackupScheduled")
            .map(|c| c.reason.clone())
            .unwrap_or_default(),
    )
}

async fn wait_scheduled_reason(ctx: &Ctx, name: &str, want: &str) -> Result {
    until(
        format!("BackupScheduled reason {want} on {name}"),
        ctx.timeout(),
        || async {
            let reason = scheduled_reason(ctx, name).await?;
            Ok(Check::when(reason == want, format!("reason '{reason}'")))
        },
    )
    .await
}

async fn wait_suspend(ctx: &Ctx, cronjob: &str, want: bool) -> Result {
    let cronjobs: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    until(
        format!("cronjob {cronjob} suspend={want}"),
        ctx.timeout(),
        || async {
            let suspend = cronjobs.get(cronjob).await?.spec.suspend;
            Ok(Check::when(
                suspend == Some(want),
                format!("suspend {suspend:?}"),
            ))
        },
    )
    .await
}

async fn wait_present(ctx: &Ctx, obj: &Obj, present: bool) -> Result {
    let what = if present { "to exist" } else { "to be absent" };
    until(
        format!("{}/{obj} {what}", ctx.ns),
        ctx.timeout(),
        || async {
            let exists = ctx.exists(obj).await?;
            Ok(Check::when(
                exists == present,
                if exists { "present" } else { "absent" },
            ))
        },
    )
    .await
}

#[scenario]
async fn backup_cronjob(ctx: Ctx) -> Result {
    let name = "nightly";
    let cronjob = Obj::new(Kind::CronJob, format!("{name}-backup"));
    // Hold the cluster before Ready: no node accepts its pod. Uncordoned whatever happens.
    set_unschedulable(&ctx, true).await?;
    let held = async {
        ctx.apply(&cluster(name, Some(&S3Backup::nightly())))
            .await?;
        wait_scheduled_reason(&ctx, name, "WaitingForReady").await?;
        let ready = ctx.ready_status_in(&ctx.ns, name).await?;
        ensure!(
            ready == "False",
            "{name} is Ready ({ready}) without a scheduled pod"
        );
        ensure!(
            !ctx.exists(&cronjob).await?,
            "the backup CronJob exists before the cluster was Ready"
        );
        Ok(())
    }
    .await;
    set_unschedulable(&ctx, false).await?;
    held?;
    say("not Ready yet (pod unschedulable): no backup CronJob");
    ctx.wait_ready(&[name]).await?;
    wait_present(&ctx, &cronjob, true).await?;
    wait_suspend(&ctx, &cronjob.name, false).await?;
    say("Ready: the backup CronJob exists and is active");

    let pod = format!("{name}-0");
    ctx.platform.pod_set_ready(&ctx.ns, &pod, false).await?;
    ctx.wait_condition_in(&ctx.ns, name, "Ready", "False")
        .await?;
    wait_suspend(&ctx, &cronjob.name, true).await?;
    say("pod unready: cluster not Ready, CronJob suspended");
    ctx.platform.pod_set_ready(&ctx.ns, &pod, true).await?;
    ctx.wait_ready(&[name]).await?;
    wait_suspend(&ctx, &cronjob.name, false).await?;
    say("pod ready again: cluster Ready, CronJob active");

    // A merge patch with null removes the field, as `--type=json` remove would.
    ctx.merge_patch_postgresql_in(&ctx.ns, name, serde_json::json!({"spec": {"backup": null}}))
        .await?;
    wait_present(&ctx, &cronjob, false).await?;
    wait_scheduled_reason(&ctx, name, "NotConfigured").await?;
    ctx.wait_ready(&[name]).await?;
    say("spec.backup removed: CronJob deleted, BackupScheduled NotConfigured");
    Ok(())
}
