//! Scenarios about the operator process itself: crashes and restarts, metrics, and no writes
//! at rest. They kill the operator, read process-wide gauges or count every write, so they
//! must not overlap with any other scenario: the runner uses `--test-threads=1`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tusk::crd::{Backup, BackupPhase, Phase, PostgreSQL};
use tusk_e2e::context::SCENARIO_LABEL;
use tusk_e2e::manifests::{S3Backup, cluster};
use tusk_e2e::metrics::sum;
use tusk_e2e::{Check, Context, Ctx, Kind, Result, ensure, fail, say, scenario, until, until_none};

#[scenario]
async fn operator_restart(ctx: Ctx) -> Result {
    let ns = ctx.ns.clone();
    let names = ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"];
    // Eight clusters in one apply, so that the operator is still busy when it is killed: as
    // soon as a watch shows its first child.
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let config = watcher::Config::default().labels("tusk.dev/cluster");
    let first_child = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(secrets, config));
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) = event {
                return Some(s.name_any());
            }
        }
        None
    });
    let yaml: Vec<String> = names
        .iter()
        .map(|n| cluster(n, Some(&S3Backup::nightly())))
        .collect();
    let applier = {
        let ctx = ctx.clone();
        let yaml = yaml.join("---\n");
        tokio::spawn(async move { ctx.apply(&yaml).await.map(drop) })
    };
    let first = tokio::time::timeout(ctx.timeout(), first_child).await;
    let Ok(Ok(Some(first))) = first else {
        fail!(
            "the operator wrote no child within {}s",
            ctx.timeout().as_secs()
        );
    };
    ctx.platform.operator_kill().await?;
    applier.await.context("the apply task")??;
    let seen = ctx
        .labelled_in(&ns, &Kind::CHILDREN, "tusk.dev/cluster")
        .await?
        .len();
    let full = names.len() * 7;
    say(format!(
        "SIGKILLed the operator with {seen} of the {full} children written (first: secret/{first})"
    ));
    if seen >= full {
        say(
            "(it had finished before the kill landed: this run proves a restart, not an interruption)",
        );
    }
    // Secrets written before the crash must survive it unchanged.
    let mut secrets_before = Vec::new();
    for obj in ctx
        .labelled_in(&ns, &[Kind::Secret], "tusk.dev/cluster")
        .await?
    {
        let uid = ctx.uid_in(&ns, &obj).await?;
        secrets_before.push((obj, uid));
    }
    ctx.platform.operator_start(ctx.timeout()).await?;
    let restarted = Instant::now();
    say("operator restarted");
    ctx.wait_ready(&names).await?;
    say(format!(
        "all {} clusters Ready {}s after the restart",
        names.len(),
        restarted.elapsed().as_secs()
    ));
    let expected = [
        (Kind::Secret, 7),
        (Kind::ConfigMap, 2),
        (Kind::Service, 4),
        (Kind::StatefulSet, 1),
        (Kind::CronJob, 1),
        (Kind::Pod, 1),
        (Kind::Pvc, 1),
    ];
    for name in names {
        ctx.check_children(name).await?;
        for (kind, want) in expected {
            let got = ctx
                .labelled_in(&ns, &[kind], &format!("tusk.dev/cluster={name}"))
                .await?
                .len();
            ensure!(got == want, "{name} has {got} {kind:?}(s), want {want}");
        }
    }
    for (obj, uid) in &secrets_before {
        ensure!(
            &ctx.uid_in(&ns, obj).await? == uid,
            "{obj} was re-created after the restart"
        );
    }
    say(format!(
        "all {} clusters Ready with exactly one of each child; Secrets kept",
        names.len()
    ));
    Ok(())
}

/// Clusters created while the operator is down must all be reconciled promptly after it
/// starts, not one at once and the rest after the 30 s cache-sync timeout. Promptly is what
/// the operator controls: every StatefulSet within 15 s. Ready then takes as long as the pods
/// take to start (seconds with kwok, initdb in real pods).
#[scenario]
async fn restart_backlog(ctx: Ctx) -> Result {
    let names = ["b1", "b2", "b3", "b4", "b5"];
    ctx.platform.operator_kill().await?;
    let yaml: Vec<String> = names.iter().map(|n| cluster(n, None)).collect();
    ctx.apply(&yaml.join("---\n")).await?;
    ctx.platform.operator_start(ctx.timeout()).await?;
    let restarted = Instant::now();
    let statefulsets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    until_none(
        "every cluster's StatefulSet",
        Duration::from_secs(15),
        || async {
            let mut missing = Vec::new();
            for name in names {
                if statefulsets.get_opt(name).await?.is_none() {
                    missing.push(name.to_owned());
                }
            }
            Ok(missing)
        },
    )
    .await?;
    let reconciled = restarted.elapsed().as_secs();
    ctx.wait_ready(&names).await?;
    say(format!(
        "{} clusters created while the operator was down: reconciled {reconciled}s and Ready \
         {}s after it started",
        names.len(),
        restarted.elapsed().as_secs()
    ));
    Ok(())
}

async fn metric(ctx: &Ctx, prefix: &str) -> Result<f64> {
    Ok(sum(&ctx.platform.operator_metrics().await?, prefix))
}

#[scenario]
async fn metrics(ctx: Ctx) -> Result {
    const STS_CREATED: &str = r#"tusk_child_writes_total{kind="StatefulSet",change="created"}"#;
    const READY: &str = r#"tusk_clusters{phase="Ready"}"#;
    let before = metric(&ctx, "tusk_reconcile_total").await?;
    let sts_before = metric(&ctx, STS_CREATED).await?;
    ctx.apply(&cluster("counted", None)).await?;
    ctx.wait_ready(&["counted"]).await?;
    until(
        format!("tusk_reconcile_total to grow past {before}"),
        ctx.timeout(),
        || async {
            let now = metric(&ctx, "tusk_reconcile_total").await?;
            Ok(Check::when(now > before, now))
        },
    )
    .await?;
    let after = metric(&ctx, "tusk_reconcile_total").await?;
    say(format!(
        "tusk_reconcile_total: {before} -> {after} after one new cluster"
    ));
    ensure!(
        metric(&ctx, "tusk_reconcile_duration_seconds_count").await? > 0.0,
        "no tusk_reconcile_duration_seconds samples"
    );
    let sts_after = metric(&ctx, STS_CREATED).await?;
    ensure!(
        sts_after == sts_before + 1.0,
        "{STS_CREATED} did not count the new StatefulSet once: {sts_before} -> {sts_after}"
    );
    // Only a lower bound: other clusters may be Ready at the same time.
    until(
        format!("{READY} to count a Ready cluster"),
        ctx.timeout(),
        || async {
            let now = metric(&ctx, READY).await?;
            Ok(Check::when(now >= 1.0, now))
        },
    )
    .await?;
    say(format!(
        "{READY} = {}; reconcile durations and child writes exposed",
        metric(&ctx, READY).await?
    ));
    Ok(())
}

/// A deleted cluster triggers no reconcile; the gauge must follow it anyway (recounted at scrape).
#[scenario]
async fn clusters_gauge_after_delete(ctx: Ctx) -> Result {
    const READY: &str = r#"tusk_clusters{phase="Ready"}"#;
    ctx.apply(&cluster("gauge", None)).await?;
    ctx.wait_ready(&["gauge"]).await?;
    ctx.delete_postgresql_and_wait_in(&ctx.ns, "gauge").await?;
    // Compared with the API server's own count, not with the gauge before the deletion: other
    // scenarios' clusters may come and go meanwhile.
    let all: kube::Api<tusk::crd::PostgreSQL> = kube::Api::all(ctx.client.clone());
    until(
        format!("{READY} to match the Ready clusters the API server lists"),
        Duration::from_secs(30),
        || async {
            let now = metric(&ctx, READY).await?;
            let listed = all.list(&Default::default()).await?;
            let ready = listed
                .iter()
                .filter(|pg| {
                    pg.status.as_ref().and_then(|s| s.phase) == Some(tusk::crd::Phase::Ready)
                })
                .count();
            let gauge_lists_gauge = listed.iter().any(|pg| {
                pg.metadata.name.as_deref() == Some("gauge")
                    && pg.metadata.namespace.as_deref() == Some(ctx.ns.as_str())
            });
            Ok(Check::when(
                now == ready as f64 && !gauge_lists_gauge,
                format!("gauge {now}, {ready} Ready listed"),
            ))
        },
    )
    .await?;
    say("tusk_clusters follows a deletion");
    Ok(())
}

/// Converged clusters (the samples, with their Backup and restore) cost no writes: the
/// operator's create/update/patch/delete requests are counted from the audit trail.
#[scenario]
async fn zero_writes_at_rest(ctx: Ctx) -> Result {
    ctx.platform.operator_writes_mark()?; // skips where there is no audit trail
    let clusters = ctx.apply_samples().await?;
    say(format!("{} clusters of samples/ applied", clusters.len()));
    wait_converged(&ctx).await?;
    let count = Api::<PostgreSQL>::all(ctx.client.clone())
        .list(&Default::default())
        .await?
        .items
        .len();
    ensure!(count > 0, "no PostgreSQL to be at rest");
    let mark = ctx.platform.operator_writes_mark()?;
    let window = ctx.settings.rest_window;
    say(format!(
        "measuring the operator's write requests for {}s with {count} converged clusters",
        window.as_secs()
    ));
    tokio::time::sleep(window).await; // a measurement window, not a synchronisation
    let writes = ctx.platform.operator_writes_since(mark)?;
    if !writes.is_empty() {
        let lines: Vec<String> = writes.iter().map(ToString::to_string).collect();
        fail!("{} write(s) at rest: {}", writes.len(), lines.join("\n"));
    }
    say(format!(
        "0 create/update/patch/delete requests by {} in {}s (Lease renewals excluded)",
        tusk_e2e::audit::OPERATOR_USER,
        window.as_secs()
    ));
    Ok(())
}

/// A point-in-time restore the operator refused before it began, for a reason only the user
/// can change.
fn refused_for_good(status: &tusk::crd::PostgreSQLStatus) -> bool {
    status.conditions.iter().any(|c| {
        c.type_ == "Restored"
            && c.status == "False"
            && [
                "NoBaseBackup",
                "TargetBeforeRecoveryWindow",
                "BaseBackupOfAnotherMajor",
            ]
            .contains(&c.reason.as_str())
    })
}

/// Every earlier scenario's namespace gone, every cluster Ready at its generation, every
/// Backup settled and reflected in its cluster's status.
async fn wait_converged(ctx: &Ctx) -> Result {
    let l4 = ctx.settings.l4;
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    until_none(
        "earlier scenarios' namespaces to be gone",
        ctx.timeout(),
        || async {
            let list = namespaces
                .list(&kube::api::ListParams::default().labels(SCENARIO_LABEL))
                .await?;
            Ok(list
                .items
                .iter()
                .filter(|n| {
                    n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
                })
                .map(ResourceExt::name_any)
                .collect())
        },
    )
    .await?;
    let clusters: Api<PostgreSQL> = Api::all(ctx.client.clone());
    until_none(
        "every PostgreSQL to be Ready at its current generation",
        ctx.timeout(),
        || async {
            let list = clusters.list(&Default::default()).await?;
            Ok(list
                .iter()
                .filter(|pg| {
                    let status = pg.status.clone().unwrap_or_default();
                    // Without L4 a cluster restoring from a backup never restores: only observed.
                    // The point-in-time sample's source takes no base backup in this suite: the
                    // operator refuses it before any pod exists, and that is where it rests.
                    let ready_enough = status.phase == Some(Phase::Ready)
                        || (pg.spec.restore.is_some() && !l4)
                        || refused_for_good(&status);
                    pg.metadata.generation != status.observed_generation || !ready_enough
                })
                .map(|pg| {
                    format!(
                        "{} {:?}",
                        qualified(pg),
                        pg.status.as_ref().and_then(|s| s.phase.as_ref())
                    )
                })
                .collect())
        },
    )
    .await?;
    let backups: Api<Backup> = Api::all(ctx.client.clone());
    until_none("every Backup to be settled", ctx.timeout(), || async {
        let list = backups.list(&Default::default()).await?;
        Ok(list
            .iter()
            // Final with L4; without it a backup Job never finishes, so Running is as far as it gets.
            .filter(|b| !(b.phase().is_final() || (!l4 && b.phase() == BackupPhase::Running)))
            .map(|b| format!("{} {:?}", qualified(b), b.phase()))
            .collect())
    })
    .await?;
    until_none(
        "clusters to show their completed Backups",
        ctx.timeout(),
        || async {
            let mut missing = Vec::new();
            for backup in backups.list(&Default::default()).await? {
                if backup.phase() != BackupPhase::Completed {
                    continue;
                }
                let ns = backup.namespace().unwrap_or_default();
                let Some(pg) = Api::<PostgreSQL>::namespaced(ctx.client.clone(), &ns)
                    .get_opt(&backup.spec.cluster.name)
                    .await?
                else {
                    continue;
                };
                if pg
                    .status
                    .as_ref()
                    .and_then(|s| s.last_successful_backup.as_ref())
                    .is_none()
                {
                    missing.push(format!(
                        "{} does not show Backup {} yet",
                        qualified(&pg),
                        backup.name_any()
                    ));
                }
            }
            Ok(missing)
        },
    )
    .await?;
    // A cluster verifying on a schedule (the S3 sample) asks for its first verification as soon
    // as a backup completes; its answer is written to the Backup and the cluster afterwards.
    until_none(
        "scheduled verifications answered and shown by their clusters",
        ctx.timeout(),
        || async {
            let pending = clusters
                .list(&Default::default())
                .await?
                .iter()
                .filter(|pg| pg.spec.backup.as_ref().is_some_and(|b| b.verify.is_some()))
                .filter(|pg| {
                    let status = pg.status.clone().unwrap_or_default();
                    let verified = status
                        .conditions
                        .iter()
                        .find(|c| c.type_ == "BackupVerified");
                    status.last_successful_backup.is_some()
                        && verified.is_none_or(|c| c.reason == "NotVerifiedYet")
                })
                .map(qualified)
                .collect();
            Ok(pending)
        },
    )
    .await
}

/// `namespace/name` of an object, for messages.
fn qualified(object: &impl ResourceExt) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}
