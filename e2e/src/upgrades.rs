//! What the upgrade scenarios share (`e2e/tests/upgrade*.rs`): the two majors of the
//! environment, a pod's major, the `Upgrading` condition as read and waited on, and the check
//! that every row a writer had acknowledged is on the new major.

use std::time::Duration;

use crate::replication::{Ack, lost, pod_sql};
use crate::{Check, Ctx, Result, ensure, until};

/// The majors of the upgrade scenarios: the suite's as applied (the real node's 15 stand-in,
/// applied as "18") and the patch that raises it (the 17 stand-in and its image); with the
/// official images, 17 and 18.
pub fn majors(ctx: &Ctx) -> (String, serde_json::Value) {
    match (&ctx.settings.postgres, &ctx.settings.postgres_next) {
        (Some(_), Some(next)) => (
            "18".into(),
            serde_json::json!({"version": next.version, "image": next.image}),
        ),
        _ => ("17".into(), serde_json::json!({"version": "18"})),
    }
}

/// The server's major on `pod`.
pub async fn major(ctx: &Ctx, pod: &str) -> Result<String> {
    let version = pod_sql(ctx, pod, "SHOW server_version_num").await?;
    Ok(version.chars().take(2).collect())
}

/// The `Upgrading` condition of `cluster` as `status reason: message`.
pub async fn upgrading(ctx: &Ctx, cluster: &str) -> Result<Option<String>> {
    let pg = ctx.postgresql_in(&ctx.ns, cluster).await?;
    let conditions = pg.status.map(|s| s.conditions).unwrap_or_default();
    Ok((conditions.iter())
        .find(|c| c.type_ == "Upgrading")
        .map(|c| format!("{} {}: {}", c.status, c.reason, c.message)))
}

/// Every acknowledged row of a writer (its table `writes`) is on `pod`: none was lost.
pub async fn every_ack_on(ctx: &Ctx, pod: &str, acks: &[Ack]) -> Result {
    let sql = "SELECT string_agg(n::text, ',' ORDER BY n) FROM writes";
    let present = pod_sql(ctx, pod, sql).await?;
    let present: Vec<i64> = present.split(',').filter_map(|n| n.parse().ok()).collect();
    let missing = lost(acks, &present);
    ensure!(
        missing.is_empty(),
        "acknowledged rows missing on {pod}: {missing:?}"
    );
    Ok(())
}

/// Waits until `cluster`'s upgrade record has ended with `Upgrading` False for `reason`;
/// returns the condition as `status reason: message`.
pub async fn ended(ctx: &Ctx, cluster: &str, reason: &str, timeout: Duration) -> Result<String> {
    let prefix = format!("False {reason}");
    until(format!("the upgrade {reason}"), timeout, || async {
        let pg = ctx.postgresql_in(&ctx.ns, cluster).await?;
        let record = pg.status.and_then(|s| s.upgrade);
        let line = upgrading(ctx, cluster).await?;
        Ok(match line {
            Some(line) if record.is_none() && line.starts_with(&prefix) => Check::Done(line),
            other => Check::Pending(format!(
                "{:?}; Upgrading {other:?}",
                record.map(|r| (r.phase, r.message))
            )),
        })
    })
    .await
}
