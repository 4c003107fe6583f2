//! What the upgrade scenarios share (`e2e/tests/upgrades.rs`, `upgrade_faults.rs`): the two
//! majors of the environment, a pod's major, and the `Upgrading` condition and phase as read.

use crate::replication::pod_sql;
use crate::{Ctx, Result};

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
