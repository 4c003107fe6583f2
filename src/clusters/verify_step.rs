//! The cluster controller's part in verifications: it owns the schedule of
//! `spec.backup.verify` (it already follows the cluster's Backups for `lastSuccessfulBackup`)
//! and asks the newest Completed Backup with `tusk.dev/verify`; the Backup controller runs the
//! Job. One path for scheduled and on-demand verifications.

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tracing::info;

use super::backup_summary::Summary;
use super::verification::{self, Due};
use crate::crd::{Backup, PostgreSQL, VERIFY_ANNOTATION};
use crate::error::Result;
use crate::resources::Cluster;
use crate::runtime::Context;
use crate::runtime::apply::merge_patch;
use crate::runtime::events::{self, normal};

/// Fills the verification part of `summary` from `own` (the cluster's Backups) and asks for a
/// scheduled verification when one is due. Returns when to look again: the next scheduled time
/// or the end of the window, whichever comes first.
pub async fn step(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    own: &[&Backup],
    summary: &mut Summary,
    ctx: &Context,
) -> Result<Option<Timestamp>> {
    summary.last_verified = verification::last_verified(own.iter().copied());
    let Some(policy) = cluster.spec.backup.as_ref().and_then(|b| b.verify.as_ref()) else {
        return Ok(None);
    };
    let now = Timestamp::now();
    summary.verified = Some(verification::condition(policy, own.iter().copied(), now));
    let window_end = verification::window_ends(policy, summary.last_verified.as_ref()).map(|t| t.0);
    let newest = summary.last_successful.as_ref().map(|b| b.name.as_str());
    let next = match verification::due(&policy.schedule, own.iter().copied(), newest, now) {
        Due::No { next } => next,
        Due::Now { backup, request } => {
            ask(ctx, cluster.namespace, &backup, &request).await?;
            info!(cluster = %cluster.name, namespace = %cluster.namespace, %backup, "scheduled verification requested");
            let note = format!("asked Backup {backup} for a scheduled verification ({request})");
            let event = normal("VerificationScheduled", "Verify", note);
            events::publish(&ctx.recorder, pg, event).await;
            None
        }
    };
    Ok([next, window_end.filter(|end| *end > now)]
        .into_iter()
        .flatten()
        .min())
}

/// Sets `tusk.dev/verify: <request>` on Backup `backup`: the same request a user makes.
async fn ask(ctx: &Context, namespace: &str, backup: &str, request: &str) -> Result<()> {
    let api: Api<Backup> = Api::namespaced(ctx.client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {VERIFY_ANNOTATION: request}}});
    merge_patch(&api, backup, &patch).await?;
    Ok(())
}
