//! A major-version upgrade as a user takes it (docs/src/cluster/upgrades.md): `spec.version`
//! raised on a replicated cluster under a writer through `-rw`; the operator copies it into a
//! new set of instances on the new major and cuts over. Every acknowledged row is on the new
//! major, the application's Secret is unchanged, the old set and its volumes go after
//! `keepOldForSeconds`, and the new set fails over like any cluster.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::Api;
use tusk_e2e::replication::{Writer, current_primary, pod_sql, write_gap};
use tusk_e2e::upgrades::{every_ack_on, major, majors, upgrading};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};

fn spec(version: &str) -> String {
    format!(
        "apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {{name: up}}
spec:
  version: \"{version}\"
  instances: 3
  storage: {{size: 1Gi}}
  parameters: {{wal_level: logical}}
  replication: {{synchronous: {{number: 1, durability: required}}}}
  upgrade: {{keepOldForSeconds: 15}}
"
    )
}

async fn app_uri(ctx: &Ctx) -> Result<Vec<u8>> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let secret = secrets.get("up-app").await?;
    let uri = (secret.data.and_then(|mut d| d.remove("uri"))).context("uri in up-app")?;
    Ok(uri.0)
}

#[scenario]
async fn raising_spec_version_upgrades_a_written_cluster_online_without_losing_a_row(
    ctx: Ctx,
) -> Result {
    ctx.require_real_pods()?;
    let (version, raise) = majors(&ctx);
    let new_set = format!("up-v{}", raise["version"].as_str().unwrap_or_default());
    ctx.apply(&spec(&version)).await?;
    ctx.wait_ready(&["up"]).await?;
    let old_primary = current_primary(&ctx, "up").await?.context("a primary")?;
    let from = major(&ctx, &old_primary).await?;
    let uri = app_uri(&ctx).await?;
    let system_before = (ctx.postgresql_in(&ctx.ns, "up").await?.status)
        .and_then(|s| s.system_identifier)
        .context("the system identifier recorded")?;
    pod_sql(
        &ctx,
        &old_primary,
        "CREATE TABLE numbered (id bigserial PRIMARY KEY, note text); \
         INSERT INTO numbered (note) SELECT 'before' FROM generate_series(1, 100)",
    )
    .await?;

    let writer = Writer::start(&ctx, "up").await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let raised = Instant::now();
    ctx.merge_patch_postgresql_in(&ctx.ns, "up", serde_json::json!({"spec": raise}))
        .await?;
    let upgraded = until("the upgrade to end", Duration::from_secs(600), || async {
        let pg = ctx.postgresql_in(&ctx.ns, "up").await?;
        let status = pg.status.unwrap_or_default();
        let upgrading = (status.conditions.iter())
            .find(|c| c.type_ == "Upgrading")
            .map(|c| format!("{} {}: {}", c.status, c.reason, c.message));
        let done = status.upgrade.is_none()
            && status.instance_set.as_deref() == Some(new_set.as_str())
            && upgrading
                .as_deref()
                .is_some_and(|u| u.starts_with("False Upgraded"));
        Ok(Check::when(
            done,
            format!("{:?}; Upgrading {upgrading:?}", status.upgrade),
        ))
    })
    .await;
    let acks = writer.stop();
    upgraded?;
    let took = raised.elapsed();

    let new_primary = current_primary(&ctx, "up").await?.context("a primary")?;
    ensure!(
        new_primary.starts_with(&format!("{new_set}-")),
        "the primary after the upgrade is {new_primary}, not one of {new_set}"
    );
    let to = major(&ctx, &new_primary).await?;
    ensure!(from != to, "the primary runs {to}, as before the upgrade");
    every_ack_on(&ctx, &new_primary, &acks).await?;
    ensure!(acks.len() > 10, "the writer wrote {} rows", acks.len());
    let next_id = pod_sql(
        &ctx,
        &new_primary,
        "INSERT INTO numbered (note) VALUES ('after') RETURNING id",
    )
    .await?;
    ensure!(
        next_id == "101",
        "the sequence continued at {next_id}, not 101"
    );
    ensure!(app_uri(&ctx).await? == uri, "the app Secret's uri changed");
    // The new major is a new system: its identifier is what the archive and the cleanup follow.
    let system_after =
        (ctx.postgresql_in(&ctx.ns, "up").await?.status).and_then(|s| s.system_identifier);
    let on_disk = pod_sql(
        &ctx,
        &new_primary,
        "SELECT system_identifier FROM pg_control_system()",
    )
    .await?;
    ensure!(
        system_after.as_deref() == Some(on_disk.as_str()) && on_disk != system_before,
        "status.systemIdentifier after the upgrade is {system_after:?}; {new_primary} has \
         {on_disk}, the old system {system_before}"
    );
    let gap = write_gap(&acks, raised).unwrap_or_default();

    // The old set is gone with its volumes.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let statefulsets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    until(
        "the old set and its claims deleted",
        ctx.timeout(),
        || async {
            let sts = statefulsets.get_opt("up").await?.is_some();
            let mut kept = Vec::new();
            for claim in ["data-up-0", "data-up-1", "data-up-2"] {
                if claims
                    .get_opt(claim)
                    .await?
                    .is_some_and(|c| c.metadata.deletion_timestamp.is_none())
                {
                    kept.push(claim);
                }
            }
            Ok(Check::when(
                !sts && kept.is_empty(),
                format!("StatefulSet up: {sts}, claims {kept:?}"),
            ))
        },
    )
    .await?;

    // The new set fails over like any cluster: its primary frozen (as on a hung node), a
    // replica of the new major promoted, writes taken.
    let failed = Instant::now();
    ctx.platform.pod_freeze(&ctx.ns, &new_primary, true).await?;
    let promoted = until("a failover on the new major", ctx.timeout(), || async {
        let now = current_primary(&ctx, "up").await?;
        let moved = now.as_deref().is_some_and(|p| p != new_primary);
        Ok(match now {
            Some(pod) if moved => Check::Done(pod),
            _ => Check::Pending(format!("primary {now:?}")),
        })
    })
    .await;
    ctx.platform
        .pod_freeze(&ctx.ns, &new_primary, false)
        .await?;
    let after = promoted?;
    let failover = failed.elapsed();
    until(
        "the promoted primary to take a write",
        ctx.timeout(),
        || async {
            let sql = "INSERT INTO numbered (note) VALUES ('failed over') RETURNING id";
            let written = pod_sql(&ctx, &after, sql).await;
            Ok(Check::when(written.is_ok(), format!("{written:?}")))
        },
    )
    .await?;
    say(format!(
        "{from} -> {to} online, 3 instances, durability required: {} acknowledged rows, 0 lost; \
         longest write gap {:.2} s; spec.version raised to old set deleted {:.0} s; the app \
         Secret unchanged; failover on {to} to {after} in {:.1} s",
        acks.len(),
        gap.as_secs_f64(),
        took.as_secs_f64(),
        failover.as_secs_f64()
    ));
    Ok(())
}

/// What logical replication cannot carry is refused before anything starts — no new set, the
/// old instances untouched — and setting `spec.version` back cancels the refused upgrade.
#[scenario]
async fn an_upgrade_the_copy_cannot_carry_is_refused_with_the_table_and_cancelled_by_the_version(
    ctx: Ctx,
) -> Result {
    ctx.require_real_pods()?;
    let (version, raise) = majors(&ctx);
    let manifest = spec(&version)
        .replace("name: up}", "name: keyless}")
        .replace("instances: 3", "instances: 1")
        .replace(
            "  replication: {synchronous: {number: 1, durability: required}}\n",
            "",
        );
    ctx.apply(&manifest).await?;
    ctx.wait_ready(&["keyless"]).await?;
    let before = ctx.postgresql_in(&ctx.ns, "keyless").await?;
    let declared = serde_json::to_value(before.spec.version)?;
    let serving = before.status.and_then(|s| s.version);
    let uid = ctx.pod_state("keyless-0").await?.uid;
    pod_sql(
        &ctx,
        "keyless-0",
        "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('x')",
    )
    .await?;

    ctx.merge_patch_postgresql_in(&ctx.ns, "keyless", serde_json::json!({"spec": raise}))
        .await?;
    let refused = until("the upgrade refused", ctx.timeout(), || async {
        let now = upgrading(&ctx, "keyless").await?;
        Ok(match now {
            Some(line) if line.starts_with("False UpgradeRefused") => Check::Done(line),
            other => Check::Pending(format!("Upgrading {other:?}")),
        })
    })
    .await?;
    ensure!(
        refused.contains("notes") && refused.contains("REPLICA IDENTITY FULL"),
        "the refusal does not name the table and the fix: {refused}"
    );
    let statefulsets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let new_set = format!("keyless-v{}", raise["version"].as_str().unwrap_or_default());
    ensure!(
        statefulsets.get_opt(&new_set).await?.is_none(),
        "{new_set} exists although the upgrade was refused"
    );
    ensure!(
        ctx.pod_state("keyless-0").await?.uid == uid,
        "keyless-0 was replaced by a refused upgrade"
    );

    ctx.merge_patch_postgresql_in(
        &ctx.ns,
        "keyless",
        serde_json::json!({"spec": {"version": declared, "image": before.spec.image}}),
    )
    .await?;
    let cancelled = until("the refused upgrade cancelled", ctx.timeout(), || async {
        let pg = ctx.postgresql_in(&ctx.ns, "keyless").await?;
        let status = pg.status.unwrap_or_default();
        let line = upgrading(&ctx, "keyless").await?;
        let done = status.upgrade.is_none()
            && line
                .as_deref()
                .is_some_and(|l| l.starts_with("False UpgradeCancelled"));
        Ok(match line {
            Some(line) if done => Check::Done((line, status.version)),
            other => Check::Pending(format!("{:?}; Upgrading {other:?}", status.upgrade)),
        })
    })
    .await?;
    ensure!(
        cancelled.1 == serving,
        "status.version is {:?} after the cancel, was {serving:?}",
        cancelled.1
    );
    pod_sql(
        &ctx,
        "keyless-0",
        "CREATE TABLE after_cancel (id int PRIMARY KEY)",
    )
    .await?;
    ensure!(
        ctx.pod_state("keyless-0").await?.uid == uid,
        "keyless-0 was replaced by the cancel"
    );
    say(format!("refused: {}; cancelled: {}", refused, cancelled.0));
    Ok(())
}
