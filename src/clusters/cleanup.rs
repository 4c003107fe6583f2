//! The `tusk.dev/cleanup` finalizer. Clusters with a backup destination carry it; on deletion,
//! `backup.onDelete: Retain` releases it at once, `Delete` first deletes this cluster's backups
//! under its prefix `<path>/<namespace>/<cluster>/` and its Backups. Nothing is deleted from a
//! bucket without that policy, and nothing outside that prefix; inside it, only backup
//! directories this cluster owns (`catalog::delete_cluster`): another cluster nested under the
//! prefix, another uid's backups and the backup this cluster was restored from stay. The WAL
//! archive under `wal/<system identifier>/` goes too, for this cluster's own system only, once
//! its pods are gone (no primary archives into an emptied prefix).

use std::time::Duration;

use backup_store::catalog;
use backup_store::layout::ClusterLocation;
use backup_store::store::ObjectStore;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, Patch};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::report::{publish, update_status};
use super::status::Outcome;
use crate::crd::{Backup, CLEANUP_FINALIZER, OnDelete, PostgreSQL};
use crate::error::{Error, Result};
use crate::resources::{CLUSTER_LABEL, Cluster, base_backup_cronjob_name, wal_archiving};
use crate::runtime::apply::{delete, patch_params};
use crate::runtime::buckets::{BucketError, cluster_location, owner};
use crate::runtime::events::normal;
use crate::runtime::jobs::{JobState, job_state};
use crate::runtime::{Context, cached};

/// Whether `pg` should carry the finalizer: it has somewhere its backups go.
pub fn wants_finalizer(pg: &PostgreSQL) -> bool {
    pg.spec.backup.is_some()
}

pub fn has_finalizer(pg: &PostgreSQL) -> bool {
    pg.finalizers().iter().any(|f| f == CLEANUP_FINALIZER)
}

/// The finalizer list with ours added or removed, others' untouched.
pub fn finalizers_with(current: &[String], present: bool) -> Vec<String> {
    let mut list: Vec<String> = current
        .iter()
        .filter(|f| *f != CLEANUP_FINALIZER)
        .cloned()
        .collect();
    if present {
        list.push(CLEANUP_FINALIZER.to_owned());
    }
    list
}

/// The JSON patch that sets the finalizer list from `current` (as read) to `wanted`. It first
/// tests the list it read, so a concurrent change by another controller makes it fail (422) and
/// the reconcile retry, instead of clobbering. An empty list is absent from the stored object
/// (`omitempty`): testing for `null` holds only while no one has added a finalizer since.
pub fn finalizer_patch(current: &[String], wanted: &[String]) -> serde_json::Value {
    if current.is_empty() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": wanted},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "replace", "path": "/metadata/finalizers", "value": wanted},
        ])
    }
}

/// Adds or removes the finalizer with [`finalizer_patch`]; returns `pg` as patched (its new
/// resourceVersion), so that this reconcile's status write is not refused as stale.
pub async fn set_finalizer(pg: &PostgreSQL, ctx: &Context, present: bool) -> Result<PostgreSQL> {
    let name = pg.name_any();
    let api: Api<PostgreSQL> =
        Api::namespaced(ctx.client.clone(), &pg.namespace().unwrap_or_default());
    let current = pg.finalizers();
    let patch = finalizer_patch(current, &finalizers_with(current, present));
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|source| Error::Serialize {
            kind: "PostgreSQL".into(),
            name: name.clone(),
            source,
        })?;
    match api
        .patch(&name, &patch_params(), &Patch::Json::<()>(patch))
        .await
    {
        Ok(patched) => {
            let mut copy = pg.clone();
            copy.metadata.resource_version = patched.metadata.resource_version;
            copy.metadata.finalizers = patched.metadata.finalizers;
            Ok(copy)
        }
        // Already gone: nothing left to hold.
        Err(kube::Error::Api(status)) if status.code == 404 && !present => Ok(pg.clone()),
        Err(source) => Err(Error::Apply {
            kind: "PostgreSQL".into(),
            name,
            source,
        }),
    }
}

/// Carries out `backup.onDelete` for a cluster being deleted, then releases it.
pub async fn finalize(pg: &PostgreSQL, ctx: &Context) -> Result<Action> {
    if !has_finalizer(pg) {
        return Ok(Action::await_change());
    }
    let policy = pg.spec.backup.as_ref();
    if policy.is_none_or(|p| p.on_delete == OnDelete::Retain) {
        set_finalizer(pg, ctx, false).await?;
        if policy.is_some() {
            let note = "backup.onDelete is Retain: every backup and Backup is kept".to_owned();
            publish(ctx, pg, normal("BackupsRetained", "Delete", note)).await;
        }
        return Ok(Action::await_change());
    }
    let Some(policy) = policy else {
        return Ok(Action::await_change());
    };
    let cluster = Cluster::new(pg)?;
    // Stop writers first: no Job, and no archiving primary, may add objects after the prefix
    // has been emptied.
    if stop_archiving(&cluster, ctx).await? {
        let message = "waiting for the database pods to stop archiving WAL before emptying the \
                       bucket prefix"
            .to_owned();
        let blocked = Outcome::CleanupBlocked {
            reason: "WaitingForArchiver",
            message,
        };
        update_status(pg, &cluster, &blocked, ctx).await?;
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    if stop_backups(&cluster, ctx).await? {
        let message =
            "waiting for running backup Jobs to stop before emptying the bucket prefix".to_owned();
        update_status(
            pg,
            &cluster,
            &Outcome::CleanupBlocked {
                reason: "WaitingForBackupJobs",
                message,
            },
            ctx,
        )
        .await?;
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    let bucket_error = |source: BucketError| Error::Bucket {
        name: cluster.name.to_owned(),
        source,
    };
    let emptied = async {
        let location = cluster_location(&policy.destination, cluster.namespace, cluster.name)?;
        let store = ctx
            .buckets
            .open(cluster.namespace, &policy.destination)
            .await?;
        let owner = owner(pg, &store.location(), &location);
        let done = catalog::delete_cluster(store.as_ref(), &location, &owner).await?;
        // The WAL of this cluster's own system: the identifier its first primary recorded.
        let system = pg
            .status
            .as_ref()
            .and_then(|s| s.system_identifier.as_deref());
        let system = system.and_then(|s| s.parse::<u64>().ok());
        // A cluster restored in place continues its predecessor's system: while a base backup
        // of that system stays (another owner's), so does the WAL it needs to restore.
        let needed_by = match system {
            Some(system) => kept_bases_of(store.as_ref(), &location, system).await?,
            None => Vec::new(),
        };
        let wal = match system {
            Some(system) if needed_by.is_empty() => {
                catalog::delete_wal(store.as_ref(), &location, system).await?
            }
            _ => 0,
        };
        Ok::<_, BucketError>((
            done,
            wal,
            format!("{}/{}", store.location(), location.prefix()),
            needed_by,
        ))
    };
    let (done, wal, prefix, needed_by) = match emptied.await {
        Ok(done) => done,
        Err(source) => {
            let error = bucket_error(source);
            let message = format!(
                "{error}. The cluster stays until its objects are deleted; set \
                 spec.backup.onDelete to Retain to delete it and keep the objects"
            );
            let blocked = Outcome::CleanupBlocked {
                reason: "StoreUnreachable",
                message,
            };
            update_status(pg, &cluster, &blocked, ctx).await?;
            return Err(error);
        }
    };
    let removed = delete_backups(&cluster, ctx).await?;
    let mut note = format!(
        "deleted {} object(s) under {prefix} and {removed} Backup(s)",
        done.objects_deleted + wal
    );
    if !done.kept.is_empty() {
        note.push_str(&format!(
            "; kept backup(s) this cluster does not own (another cluster's uid, or the one it \
             was restored from): {}",
            done.kept.join(", ")
        ));
    }
    if !needed_by.is_empty() {
        note.push_str(&format!(
            "; kept the WAL archive of this cluster's database system, which base backup(s) \
             {} of a predecessor restored in place still need",
            needed_by.join(", ")
        ));
    }
    publish(ctx, pg, normal("BackupsDeleted", "Delete", note)).await;
    set_finalizer(pg, ctx, false).await?;
    Ok(Action::await_change())
}

/// The base backups of `system` left in the prefix once this cluster's own are deleted.
async fn kept_bases_of(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    system: u64,
) -> std::result::Result<Vec<String>, BucketError> {
    let left = catalog::load(store, location).await?;
    let system = system.to_string();
    Ok((left.backups.iter())
        .filter(|b| (b.manifest.physical.as_ref()).is_some_and(|p| p.system_identifier == system))
        .map(|b| b.manifest.backup_id.clone())
        .collect())
}

/// Deletes the StatefulSet of a cluster that archives WAL; returns whether a database pod is
/// still there (its archiver could upload after the prefix was emptied).
async fn stop_archiving(cluster: &Cluster<'_>, ctx: &Context) -> Result<bool> {
    if wal_archiving(cluster).is_none() {
        return Ok(false);
    }
    let ns = cluster.namespace;
    let name = cluster.statefulset_name();
    if ctx.caches.statefulsets.contains(ns, &name) {
        let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), ns);
        delete(&api, &name).await?;
    }
    let running = (ctx.caches.pods)
        .map_all(|pod_ns, _, pod| pod_ns == ns && pod.cluster.as_deref() == Some(cluster.name))
        .contains(&true);
    Ok(running)
}

/// Deletes the CronJobs and any unfinished backup Job; returns whether one is still running.
async fn stop_backups(cluster: &Cluster<'_>, ctx: &Context) -> Result<bool> {
    let ns = cluster.namespace;
    for name in [
        cluster.cronjob_name(),
        base_backup_cronjob_name(cluster.name),
    ] {
        if cached(&ctx.caches.cronjobs, ns, &name).is_some() {
            let api: Api<CronJob> = Api::namespaced(ctx.client.clone(), ns);
            delete(&api, &name).await?;
        }
    }
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), ns);
    let mut running = false;
    for job in ctx.caches.jobs.state() {
        let mine = job.namespace().as_deref() == Some(ns)
            && job.labels().get(CLUSTER_LABEL).map(String::as_str) == Some(cluster.name)
            && job
                .labels()
                .get("app.kubernetes.io/component")
                .map(String::as_str)
                == Some("backup");
        if mine && matches!(job_state(&job), JobState::Active { .. }) {
            running = true;
            if job.meta().deletion_timestamp.is_none() {
                delete(&api, &job.name_any()).await?;
            }
        }
    }
    Ok(running)
}

/// Deletes the Backups of the cluster (they described objects that no longer exist).
async fn delete_backups(cluster: &Cluster<'_>, ctx: &Context) -> Result<usize> {
    let api: Api<Backup> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let mut names: Vec<String> = ctx
        .caches
        .backups
        .state()
        .iter()
        .filter(|b| b.namespace().as_deref() == Some(cluster.namespace))
        .filter(|b| b.spec.cluster.name == cluster.name)
        .map(|b| b.name_any())
        .collect();
    names.sort();
    for name in &names {
        delete(&api, name).await?;
    }
    Ok(names.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_finalizer_changes() {
        let others = vec!["example.com/keep".to_owned()];
        assert_eq!(
            finalizers_with(&others, true),
            ["example.com/keep", CLEANUP_FINALIZER]
        );
        let both = finalizers_with(&others, true);
        assert_eq!(
            finalizers_with(&both, true),
            both,
            "adding twice is a no-op"
        );
        assert_eq!(finalizers_with(&both, false), others);
    }

    #[test]
    fn every_finalizer_patch_tests_the_list_it_read() {
        let ours = vec![CLEANUP_FINALIZER.to_owned()];
        // Nothing read: the patch holds only while the list is still absent.
        assert_eq!(
            finalizer_patch(&[], &ours),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [CLEANUP_FINALIZER]},
            ])
        );
        let others = vec!["example.com/keep".to_owned()];
        let both = finalizers_with(&others, true);
        assert_eq!(
            finalizer_patch(&others, &both),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["example.com/keep"]},
                {"op": "replace", "path": "/metadata/finalizers", "value": both},
            ])
        );
    }
}
