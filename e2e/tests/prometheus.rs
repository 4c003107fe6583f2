//! L4: a real Prometheus scrapes the operator with the shipped alert rules loaded. Each alert is
//! made true by what it watches — the operator unreachable, a cluster whose pod is unready, a
//! backup that failed, a verification that failed, backups overdue — and is seen firing (or
//! pending, where its `for` outlasts a test); then every panel query of the shipped dashboard returns series.

use std::time::Duration;

use tusk::crd::{BackupPhase, VerificationPhase};
use tusk_e2e::backups::unix_seconds;
use tusk_e2e::bucket::{APP_DUMP, Damage};
use tusk_e2e::manifests::{S3Backup, backup, cluster};
use tusk_e2e::prometheus::{Alert, Prometheus, RULES, dashboard_queries};
use tusk_e2e::testbin::repo;
use tusk_e2e::{Check, Context, Ctx, Failure, Result, ensure, say, scenario, until};

/// Long enough for backups on an every-minute schedule to become overdue (two runs and half
/// an interval: at most 2.5 min after scheduling starts) and stay so for the rule's `for: 1m`.
const OVERDUE: Duration = Duration::from_secs(360);

#[scenario]
async fn l4_prometheus_fires_every_alert_and_answers_every_panel(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let target = ctx.platform.operator_metrics_target()?;
    // Nothing listens on port 1: the operator is "down" until Prometheus is pointed at it.
    let prometheus = Prometheus::start(&std::env::temp_dir(), "127.0.0.1:1").await?;
    let result = alerts_and_panels(&ctx, &prometheus, &target).await;
    if let Err(Failure::Fail(_)) = &result {
        let log = prometheus.log();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        say(format!(
            "prometheus log (last lines, newest first):\n{}",
            tail.join("\n")
        ));
    }
    result
}

async fn alerts_and_panels(ctx: &Ctx, prometheus: &Prometheus, target: &str) -> Result {
    let names = alert_names()?;
    let rules = until(
        "every shipped rule loaded and evaluated",
        ctx.timeout(),
        || async {
            let rules = prometheus.rules().await?;
            let healthy = names
                .iter()
                .all(|n| rules.iter().any(|r| &r.name == n && r.health == "ok"));
            Ok(if healthy {
                Check::Done(rules)
            } else {
                Check::Pending(format!("{rules:?}"))
            })
        },
    )
    .await?;
    say(format!(
        "{} rules loaded, healthy: {}",
        rules.len(),
        names.join(", ")
    ));

    wait_alert(prometheus, "TuskOperatorDown", &[], false, ctx.timeout()).await?;
    prometheus.retarget(target).await?;
    let down = expr_of(&rules, "TuskOperatorDown")?;
    until(
        "the operator's target up and TuskOperatorDown's expression empty",
        ctx.timeout(),
        || async {
            let up = prometheus.query("up{job=\"tusk-operator\"}").await?;
            let still_down = prometheus.query(&down).await?;
            let is_up = up.iter().any(|s| s.value.1 == "1");
            Ok(Check::when(
                is_up && still_down.is_empty(),
                format!("up {up:?}, {down}: {still_down:?}"),
            ))
        },
    )
    .await?;
    say(format!(
        "scraping {target}: up 1, TuskOperatorDown resolved"
    ));

    let ns = ctx.ns.clone();
    // Backups every minute into a bucket that does not exist: each fails, none succeeds.
    let missing = S3Backup::lifecycle(3, "Retain", &ctx.settings.s3_endpoint);
    let late = cluster("late", Some(&missing))
        .replace("bucket: tusk-backups", "bucket: tusk-no-such-bucket")
        .replace("schedule: \"0 2 * * *\"", "schedule: \"* * * * *\"");
    ctx.apply(&late).await?;
    ctx.apply(&cluster("down", None)).await?;
    ctx.wait_ready(&["late", "down"]).await?;
    ctx.platform.pod_set_ready(&ns, "down-0", false).await?;
    ctx.apply(&backup("boom", "late")).await?;
    let backups = ctx.backups_in(&ns);
    until(
        "Backup boom into the missing bucket to fail",
        ctx.timeout(),
        || async {
            let phase = backups.get("boom").await?.phase();
            Ok(Check::when(
                phase == BackupPhase::Failed,
                format!("{phase:?}"),
            ))
        },
    )
    .await?;

    ctx.backed_up_lifecycle_db("src").await?;
    let passed = ctx.verify_backup("src", "e2e-1").await?;
    ctx.take_backup_in(&ns, "db", "partial").await?;
    ctx.damage_backup_in(&ns, "partial", APP_DUMP, Damage::Delete)
        .await?;
    let failed = ctx.verify_backup("partial", "e2e-1").await?;
    ensure!(
        passed.phase == Some(VerificationPhase::Passed)
            && failed.phase == Some(VerificationPhase::Failed),
        "verifications: src {passed:?}, partial {failed:?}"
    );
    say("verifications: src Passed, partial Failed");

    let here = [("namespace", ns.as_str()), ("cluster", "late")];
    wait_alert(prometheus, "TuskBackupOverdue", &here, true, OVERDUE).await?;
    // Neither has a `for`: firing at once. TuskClusterNotReady waits 15 min: pending.
    for name in ["TuskBackupFailed", "TuskBackupVerificationFailed"] {
        wait_alert(prometheus, name, &[], true, ctx.timeout()).await?;
    }
    wait_alert(prometheus, "TuskClusterNotReady", &[], false, ctx.timeout()).await?;
    // The instance managers' and the poolers' alerts are about pods this platform does not run
    // (kwok plays the node): promtool's unit tests cover them (deploy/monitoring/rules_test.yaml).
    let operator_rules = rules.iter().filter(|r| {
        r.name != "TuskOperatorDown"
            && !r.query.contains("tusk_instance_")
            && !r.query.contains("tusk_pooler_")
    });
    for rule in operator_rules {
        if rule.name == "TuskCertificateExpiringSoon" {
            // Certificates issued here expire in two years: the threshold cannot be reached
            // (promtool's unit test covers it). What this platform shows is that the operator
            // exports each cluster's expiry, in the future, for the expression to read.
            let metric = "tusk_server_certificate_expiry_timestamp_seconds{cluster=\"late\"}";
            let series = prometheus.query(metric).await?;
            let now = unix_seconds() as f64;
            let ahead = series.iter().any(|s| {
                s.value
                    .1
                    .parse::<f64>()
                    .is_ok_and(|at| at > now + 365.0 * 86400.0)
            });
            ensure!(
                ahead,
                "{metric}: {series:?}, expected an expiry over a year ahead"
            );
            continue;
        }
        let series = prometheus.query(&rule.query).await?;
        ensure!(
            !series.is_empty(),
            "{}'s expression returns no series: {}",
            rule.name,
            rule.query
        );
    }

    let panels = dashboard_queries()?;
    until(
        format!("all {} dashboard queries to return series", panels.len()),
        ctx.timeout(),
        || async {
            let mut empty = Vec::new();
            for (title, expr) in &panels {
                if prometheus.query(expr).await?.is_empty() {
                    empty.push(format!("{title}: {expr}"));
                }
            }
            Ok(Check::when(
                empty.is_empty(),
                format!("no series: {empty:?}"),
            ))
        },
    )
    .await?;
    say(format!(
        "all {} dashboard queries return series",
        panels.len()
    ));
    Ok(())
}

/// Waits until alert `name` with `labels` is active: firing if `firing`, else pending or
/// firing (a rule whose `for` outlasts the scenario).
async fn wait_alert(
    prometheus: &Prometheus,
    name: &str,
    labels: &[(&str, &str)],
    firing: bool,
    timeout: Duration,
) -> Result<Alert> {
    let alert = until(format!("alert {name} {labels:?}"), timeout, || async {
        let alerts = prometheus.alerts().await?;
        let found = alerts.iter().find(|a| {
            a.labels.get("alertname").map(String::as_str) == Some(name)
                && (!firing || a.state == "firing")
                && labels
                    .iter()
                    .all(|(k, v)| a.labels.get(*k).map(String::as_str) == Some(*v))
        });
        Ok(match found {
            Some(a) => Check::Done(a.clone()),
            None => Check::Pending(format!("{alerts:?}")),
        })
    })
    .await?;
    say(format!("{name}: {} {:?}", alert.state, alert.labels));
    Ok(alert)
}

/// The alert names in the shipped rule file.
fn alert_names() -> Result<Vec<String>> {
    let file = repo().join(RULES);
    let text = std::fs::read_to_string(&file).context(format!("reading {}", file.display()))?;
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(str::to_owned)
        .collect();
    ensure!(!names.is_empty(), "no alerts in {}", file.display());
    Ok(names)
}

fn expr_of(rules: &[tusk_e2e::prometheus::Rule], name: &str) -> Result<String> {
    match rules.iter().find(|r| r.name == name) {
        Some(rule) => Ok(rule.query.clone()),
        None => tusk_e2e::fail!("rule {name} is not loaded"),
    }
}
