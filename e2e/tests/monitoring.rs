//! The metric the TuskBackupOverdue alert reads, served by the running operator: a scheduled
//! cluster's overdue time is exactly two runs of its schedule after the schedule started, plus
//! half the interval, and the series leaves /metrics when the schedule is suspended.

use tusk_e2e::cluster::{condition, conditions};
use tusk_e2e::manifests::{S3Backup, cluster};
use tusk_e2e::metrics::sum;
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

const DAY: i64 = 86_400;

/// The overdue time of `name` on /metrics, if it has a series.
async fn overdue_at(ctx: &Ctx, name: &str) -> Result<Option<i64>> {
    let line = format!(
        "tusk_backup_overdue_timestamp_seconds{{namespace=\"{}\",cluster=\"{name}\"}}",
        ctx.ns
    );
    let text = ctx.platform.operator_metrics().await?;
    Ok(text
        .lines()
        .any(|l| l.starts_with(&line))
        .then(|| sum(&text, &line) as i64))
}

#[scenario]
async fn backup_overdue_metric(ctx: Ctx) -> Result {
    let name = "overdue";
    // Scheduled "0 2 * * *"; nothing runs within the scenario.
    ctx.apply(&cluster(name, Some(&S3Backup::nightly())))
        .await?;
    ctx.wait_ready(&[name]).await?;
    let scheduled = until(
        format!("BackupScheduled=True on {name}"),
        ctx.timeout(),
        || async {
            let pg = ctx.postgresql_in(&ctx.ns, name).await?;
            let since = condition(conditions(&pg), "BackupScheduled")
                .filter(|c| c.status == "True")
                .map(|c| c.last_transition_time.0.as_second());
            Ok(since.map_or(Check::Pending("not yet".into()), Check::Done))
        },
    )
    .await?;
    // First 02:00 UTC after the schedule started, the next one, then half a day of grace.
    let midnight = scheduled - scheduled.rem_euclid(DAY);
    let first = if midnight + 7_200 > scheduled {
        midnight + 7_200
    } else {
        midnight + DAY + 7_200
    };
    let expected = first + DAY + DAY / 2;
    let served = until(
        format!("{name}'s overdue time on /metrics"),
        ctx.timeout(),
        || async {
            let at = overdue_at(&ctx, name).await?;
            Ok(at.map_or(Check::Pending("no series yet".into()), Check::Done))
        },
    )
    .await?;
    say(format!(
        "BackupScheduled since {scheduled}: overdue at {served} (expected {expected})"
    ));
    ensure!(
        served == expected,
        "tusk_backup_overdue_timestamp_seconds is {served}, expected {expected}"
    );

    let suspend = serde_json::json!({"spec": {"backup": {"suspend": true}}});
    ctx.merge_patch_postgresql_in(&ctx.ns, name, suspend)
        .await?;
    until(
        format!("{name}'s series to leave /metrics once suspended"),
        ctx.timeout(),
        || async {
            let at = overdue_at(&ctx, name).await?;
            Ok(Check::when(at.is_none(), format!("{at:?}")))
        },
    )
    .await?;
    say("suspended: no series, so no alert");
    Ok(())
}
