//! Every scheduled run becomes a Backup: the cluster's reconcile creates one for each Job of its
//! CronJobs (logical, and base backups with `walArchive`), then marks the Job so that a Backup
//! later removed by retention is not re-created.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use serde_json::json;

use crate::crd::{Backup, BackupMethod, RECORDED_ANNOTATION, SCHEDULED_LABEL};
use crate::error::Result;
use crate::resources::{CLUSTER_LABEL, Cluster, MANAGED_BY, scheduled_cronjob_name};
use crate::runtime::apply::{Written, create, patch_params, unless_gone};
use crate::runtime::{Context, cached};

/// The Jobs of `cluster`'s backup CronJobs that have no Backup yet, with the method of the
/// CronJob that ran them.
pub fn unrecorded_runs<'a>(
    jobs: impl IntoIterator<Item = &'a Job>,
    cluster: &str,
    has_backup: impl Fn(&str) -> bool,
) -> Vec<(&'a Job, BackupMethod)> {
    let method_of = |job: &Job| {
        [BackupMethod::Logical, BackupMethod::Physical]
            .into_iter()
            .find(|method| {
                let cronjob = scheduled_cronjob_name(cluster, *method);
                (job.owner_references().iter()).any(|o| o.kind == "CronJob" && o.name == cronjob)
            })
    };
    jobs.into_iter()
        .filter(|job| !job.annotations().contains_key(RECORDED_ANNOTATION))
        .filter(|job| !has_backup(&job.name_any()))
        .filter_map(|job| Some((job, method_of(job)?)))
        .collect()
}

/// The Backup recording a scheduled Job: same name, not owned by the cluster, so that it
/// outlives the cluster and stays usable for a restore.
pub fn scheduled_backup(job: &Job, cluster: &str, method: BackupMethod) -> Backup {
    let mut backup = Backup::of_cluster(
        &job.name_any(),
        &job.namespace().unwrap_or_default(),
        cluster,
    );
    backup.spec.method = method;
    backup.metadata.labels = Some(BTreeMap::from([
        (CLUSTER_LABEL.to_owned(), cluster.to_owned()),
        (SCHEDULED_LABEL.to_owned(), "true".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGED_BY.to_owned(),
        ),
    ]));
    backup
}

/// Creates a Backup for every unrecorded run of the cluster's CronJob, then marks the Job.
/// Returns the Backups created.
pub async fn record_scheduled_runs(cluster: &Cluster<'_>, ctx: &Context) -> Result<Vec<Written>> {
    let ns = cluster.namespace;
    let jobs = ctx.caches.jobs_by_cluster.objects(ns, cluster.name);
    let mine = jobs.iter().map(AsRef::as_ref);
    let has_backup = |name: &str| cached(&ctx.caches.backups, ns, name).is_some();
    let todo = unrecorded_runs(mine, cluster.name, has_backup);
    let (backups, job_api): (Api<Backup>, Api<Job>) = (
        Api::namespaced(ctx.client.clone(), ns),
        Api::namespaced(ctx.client.clone(), ns),
    );
    let mut created = Vec::new();
    for (job, method) in todo {
        let name = job.name_any();
        let backup = scheduled_backup(job, cluster.name, method);
        created.extend(Written::of(&backup, create(&backups, &backup).await?));
        // A merge patch, not an apply: it must never re-create a Job that is gone.
        let mark = json!({"metadata": {"annotations": {RECORDED_ANNOTATION: name}}});
        // Removed by the CronJob's history limit meanwhile: nothing left to mark.
        let marked = job_api
            .patch(&name, &patch_params(), &Patch::Merge(&mark))
            .await;
        unless_gone(marked, "Job", &name)?;
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn job(name: &str, owner: &str, annotated: bool) -> Job {
        let mut job = Job::default();
        job.metadata.name = Some(name.into());
        job.metadata.namespace = Some("prod".into());
        job.metadata.owner_references = Some(vec![OwnerReference {
            kind: "CronJob".into(),
            name: owner.into(),
            ..OwnerReference::default()
        }]);
        if annotated {
            job.metadata.annotations =
                Some([(RECORDED_ANNOTATION.to_owned(), name.to_owned())].into());
        }
        job
    }

    #[test]
    fn records_each_run_of_the_clusters_cronjob_once() {
        let jobs = [
            job("demo-backup-1", "demo-backup", false),
            job("demo-backup-2", "demo-backup", true),
            job("demo-backup-3", "demo-backup", false),
            job("demo2-backup-1", "demo2-backup", false),
            job("demo-base-1", "demo-base", false),
            job("demo-other-1", "demo-other", false),
        ];
        let todo = unrecorded_runs(jobs.iter(), "demo", |name| name == "demo-backup-3");
        let runs: Vec<(String, BackupMethod)> = (todo.iter())
            .map(|(j, method)| (j.name_any(), *method))
            .collect();
        assert_eq!(
            runs,
            [
                ("demo-backup-1".to_owned(), BackupMethod::Logical),
                ("demo-base-1".to_owned(), BackupMethod::Physical)
            ]
        );
    }

    #[test]
    fn the_record_is_labelled_and_not_owned() {
        let run = job("demo-backup-1", "demo-backup", false);
        let b = scheduled_backup(&run, "demo", BackupMethod::Logical);
        assert_eq!(b.metadata.namespace.as_deref(), Some("prod"));
        assert_eq!(b.spec.cluster.name, "demo");
        assert_eq!(b.labels()[SCHEDULED_LABEL], "true");
        assert!(b.metadata.owner_references.is_none());
        let base = job("demo-base-1", "demo-base", false);
        let b = scheduled_backup(&base, "demo", BackupMethod::Physical);
        assert_eq!(b.spec.method, BackupMethod::Physical);
    }
}
