//! Retention after each completed backup: the objects in the bucket first, then the Backups
//! that described them. The newest complete backup and the newest verified one are never deleted.

use backup_store::duration::parse_duration;
use backup_store::ownership::Owner;
use backup_store::prune;
use backup_store::retention::Policy;
use kube::ResourceExt;
use kube::api::Api;
use std::sync::Arc;
use tracing::{info, warn};

use crate::crd::last_verified;
use crate::crd::{Backup, PostgreSQL, Retention};
use crate::runtime::Context;
use crate::runtime::apply::delete;
use crate::runtime::buckets::{BucketError, cluster_location, owner};
use crate::runtime::events::{self, normal, warning};

/// The agent's retention policy for a spec's `retention`.
pub fn policy(retention: &Retention) -> Policy {
    // The CRD patterns only admit values the agent parses; an unparsable one keeps all.
    let duration = |text: &Option<String>| text.as_deref().and_then(|t| parse_duration(t).ok());
    Policy {
        keep: retention.keep.and_then(|k| usize::try_from(k).ok()),
        max_age: duration(&retention.max_age),
        recovery_window: duration(&retention.recovery_window),
    }
}

/// Backups of `cluster` whose backup id was deleted from the bucket.
pub fn described_by<'a>(
    backups: impl IntoIterator<Item = &'a Backup>,
    cluster: &str,
    deleted_ids: &[String],
) -> Vec<&'a Backup> {
    backups
        .into_iter()
        .filter(|b| b.spec.cluster.name == cluster)
        .filter(|b| {
            let id = b.status.as_ref().and_then(|s| s.backup_id.as_deref());
            id.is_some_and(|id| deleted_ids.iter().any(|d| d == id))
        })
        .collect()
}

/// The backup id of the newest verified Backup of `cluster` in `namespace`.
fn newest_verified(backups: &[Arc<Backup>], namespace: &str, cluster: &str) -> Option<String> {
    let own = backups
        .iter()
        .map(AsRef::as_ref)
        .filter(|b| b.namespace().as_deref() == Some(namespace) && b.spec.cluster.name == cluster);
    last_verified(own).map(|v| v.name)
}

/// `owner`, also never deleting `verified`: the newest backup known to restore is kept, in
/// addition to the newest complete one (which retention itself never deletes).
fn protecting_verified(owner: Owner, verified: Option<String>) -> Owner {
    match verified {
        Some(id) => owner.protecting(id),
        None => owner,
    }
}

/// Applies the cluster's retention after `trigger` completed. Best effort: a failure is an
/// Event on the Backup, and the next completed backup tries again.
pub async fn apply(ctx: &Context, pg: &PostgreSQL, trigger: &Backup) {
    let Some(backup) = &pg.spec.backup else {
        return;
    };
    let Some(retention) = &backup.retention else {
        return;
    };
    let (cluster, ns) = (pg.name_any(), pg.namespace().unwrap_or_default());
    let result = async {
        let store = ctx.buckets.open(&ns, &backup.destination).await?;
        let location = cluster_location(&backup.destination, &ns, &cluster)?;
        let now = k8s_openapi::jiff::Timestamp::now();
        let verified = newest_verified(&ctx.caches.backups.state(), &ns, &cluster);
        let owner = protecting_verified(owner(pg, &store.location(), &location), verified);
        Ok::<_, BucketError>(
            prune::prune(store.as_ref(), &location, &owner, policy(retention), now).await?,
        )
    }
    .await;
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            let note = format!("retention of {cluster} could not be applied: {e}");
            let event = warning("RetentionFailed", "Retention", note);
            events::publish(&ctx.recorder, trigger, event).await;
            return;
        }
    };
    if report.deleted.is_empty() {
        return;
    }
    info!(%cluster, namespace = %ns, deleted = ?report.deleted, "retention deleted backups");
    let api: Api<Backup> = Api::namespaced(ctx.client.clone(), &ns);
    let state = ctx.caches.backups.state();
    let mut failed = Vec::new();
    for doomed in described_by(state.iter().map(AsRef::as_ref), &cluster, &report.deleted) {
        let name = doomed.name_any();
        match delete(&api, &name).await {
            Ok(()) => {}
            Err(e) => {
                warn!(backup = %name, error = %e, "could not delete a Backup removed by retention");
                failed.push(name);
            }
        }
    }
    let mut note = format!(
        "retention deleted {} backup(s) of {cluster} from the bucket: {}",
        report.deleted.len(),
        report.deleted.join(", ")
    );
    if !failed.is_empty() {
        note.push_str(&format!(
            "; these Backups could not be deleted: {}",
            failed.join(", ")
        ));
    }
    let event = normal("RetentionApplied", "Retention", note);
    events::publish(&ctx.recorder, trigger, event).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BackupStatus;
    use std::time::Duration;

    fn backup(name: &str, cluster: &str, id: Option<&str>) -> Backup {
        let mut b = Backup::of_cluster(name, "prod", cluster);
        b.status = id.map(|id| BackupStatus {
            backup_id: Some(id.into()),
            ..BackupStatus::default()
        });
        b
    }

    #[test]
    fn policy_follows_the_spec() {
        let p = policy(&Retention {
            keep: Some(3),
            max_age: Some("2w".into()),
            recovery_window: Some("36h".into()),
        });
        assert_eq!(p.keep, Some(3));
        assert_eq!(p.max_age, Some(Duration::from_secs(14 * 86_400)));
        assert_eq!(p.recovery_window, Some(Duration::from_secs(36 * 3_600)));
        let none = policy(&Retention {
            keep: None,
            max_age: None,
            recovery_window: None,
        });
        assert_eq!(
            (none.keep, none.max_age, none.recovery_window),
            (None, None, None)
        );
    }

    #[test]
    fn only_the_clusters_backups_with_deleted_ids_go() {
        let all = [
            backup("a", "demo", Some("a")),
            backup("b", "demo", Some("b")),
            backup("a2", "other", Some("a")),
            backup("pending", "demo", None),
        ];
        let doomed = described_by(all.iter(), "demo", &["a".to_owned()]);
        let names: Vec<String> = doomed.iter().map(|b| b.name_any()).collect();
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn the_newest_verified_backup_of_the_cluster_is_protected() {
        let verified = |name: &str, cluster: &str, completed: i64| {
            let mut b = backup(name, cluster, Some(name));
            let at = |s| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::from_second(s).expect("a valid time"),
                )
            };
            if let Some(status) = b.status.as_mut() {
                status.completed_at = Some(at(completed));
                status.verification = Some(crate::crd::Verification {
                    phase: Some(crate::crd::VerificationPhase::Passed),
                    completed_at: Some(at(completed + 60)),
                    ..Default::default()
                });
            }
            b.metadata.namespace = Some("prod".into());
            Arc::new(b)
        };
        let all = [
            verified("older", "demo", 100),
            verified("newer", "demo", 200),
            verified("elsewhere", "other", 300),
            Arc::new(backup("unverified", "demo", Some("unverified"))),
        ];
        let id = newest_verified(&all, "prod", "demo");
        assert_eq!(id.as_deref(), Some("newer"));
        let owner = protecting_verified(Owner::new(Some("uid")), id);
        assert!(!owner.may_delete("newer", Some("uid")));
        assert!(owner.may_delete("older", Some("uid")));
        let unprotected = protecting_verified(Owner::new(Some("uid")), None);
        assert!(unprotected.may_delete("newer", Some("uid")));
    }
}
