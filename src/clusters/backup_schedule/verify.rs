//! The cluster controller's part in verifications: it owns the schedule of
//! `spec.backup.verify` (it already follows the cluster's Backups for `lastSuccessfulBackup`)
//! and asks the newest Completed Backup with `tusk.dev/verify`; the Backup controller runs the
//! Job. One path for scheduled and on-demand verifications.

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tracing::info;

use super::summary::Summary;
use super::verification::{self, Due};
use crate::crd::{Backup, BackupMethod, BackupPhase, VERIFY_ANNOTATION};
use crate::error::Result;
use crate::resources::{Cluster, wal_archiving};
use crate::runtime::Context;
use crate::runtime::apply::merge_patch;

/// When to look at verifications again, and the request this reconcile made.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verifications {
    /// The next scheduled time or the end of the window, whichever comes first.
    pub next: Option<Timestamp>,
    /// A sentence for the Event of a scheduled verification asked for now.
    pub asked: Option<String>,
}

/// Fills the verification part of `summary` from `own` (the cluster's Backups) and asks for a
/// scheduled verification when one is due.
pub async fn schedule(
    cluster: &Cluster<'_>,
    own: &[&Backup],
    summary: &mut Summary,
    ctx: &Context,
) -> Result<Verifications> {
    summary.last_verified = verification::last_verified(own.iter().copied());
    let Some(policy) = cluster.spec.backup.as_ref().and_then(|b| b.verify.as_ref()) else {
        return Ok(Verifications::default());
    };
    let now = Timestamp::now();
    summary.verified = Some(verification::condition(policy, own.iter().copied(), now));
    let window_end = verification::window_ends(policy, summary.last_verified.as_ref()).map(|t| t.0);
    let newest = newest_to_verify(own, wal_archiving(cluster).is_some());
    let (next, asked) = match verification::due(&policy.schedule, own.iter().copied(), newest, now)
    {
        Due::No { next } => (next, None),
        Due::Now { backup, request } => {
            ask(ctx, cluster.namespace, &backup, &request).await?;
            info!(cluster = %cluster.name, namespace = %cluster.namespace, %backup, "scheduled verification requested");
            let note = format!("asked Backup {backup} for a scheduled verification ({request})");
            (None, Some(note))
        }
    };
    let next = [next, window_end.filter(|end| *end > now)]
        .into_iter()
        .flatten()
        .min();
    Ok(Verifications { next, asked })
}

/// The Backup a scheduled verification proves: while the cluster archives, the newest Completed
/// physical one (its proof replays the archive too), else the newest logical one.
fn newest_to_verify<'a>(own: &[&'a Backup], archives: bool) -> Option<&'a str> {
    let physical = archives
        .then(|| newest(own, BackupMethod::Physical))
        .flatten();
    physical.or_else(|| newest(own, BackupMethod::Logical))
}

fn newest<'a>(own: &[&'a Backup], method: BackupMethod) -> Option<&'a str> {
    own.iter()
        .filter(|b| b.phase() == BackupPhase::Completed && b.spec.method == method)
        .filter_map(|b| {
            Some((
                b.status.as_ref()?.completed_at.as_ref()?.0,
                b.metadata.name.as_deref()?,
            ))
        })
        .max()
        .map(|(_, name)| name)
}

/// Sets `tusk.dev/verify: <request>` on Backup `backup`: the same request a user makes.
async fn ask(ctx: &Context, namespace: &str, backup: &str, request: &str) -> Result<()> {
    let api: Api<Backup> = Api::namespaced(ctx.client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {VERIFY_ANNOTATION: request}}});
    merge_patch(&api, backup, &patch).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BackupStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn completed(name: &str, second: i64, method: BackupMethod) -> Backup {
        let mut b = Backup::of_cluster(name, "prod", "demo");
        b.spec.method = method;
        b.status = Some(BackupStatus {
            phase: Some(BackupPhase::Completed),
            completed_at: Some(Time(Timestamp::from_second(second).unwrap())),
            ..BackupStatus::default()
        });
        b
    }

    #[test]
    fn scheduled_verification_takes_the_newest_base_backup_while_archiving_else_a_dump() {
        let old = completed("dump-old", 10, BackupMethod::Logical);
        let new = completed("dump-new", 20, BackupMethod::Logical);
        let base = completed("base", 30, BackupMethod::Physical);
        let older_base = completed("base-old", 5, BackupMethod::Physical);
        let all = [&old, &base, &new, &older_base];
        assert_eq!(newest_to_verify(&all, false), Some("dump-new"));
        assert_eq!(newest_to_verify(&all, true), Some("base"));
        assert_eq!(newest_to_verify(&[&new], true), Some("dump-new"));
        assert_eq!(newest_to_verify(&[&base], false), None);
    }
}
