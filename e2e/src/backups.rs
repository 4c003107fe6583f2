//! Backups and Jobs: on-demand Backups, Jobs created from a CronJob as the CronJob controller
//! (or `kubectl create job --from`) would, and the bucket prefixes of a cluster.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Resource};

use crate::bucket::Damage;
use crate::wait::{Check, until};
use crate::{Context, Ctx, Level, Result, absent, fail, manifests};

impl Ctx {
    pub fn jobs_in(&self, ns: &str) -> Api<Job> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Applies an on-demand Backup and waits until it is Completed; returns how long it took
    /// from the apply.
    pub async fn take_backup_in(&self, ns: &str, cluster: &str, name: &str) -> Result<Duration> {
        let started = Instant::now();
        self.apply_in(ns, &manifests::backup(name, cluster)).await?;
        self.wait_backup_condition_in(ns, name, "Completed").await?;
        Ok(started.elapsed())
    }

    /// Keys under `<path>/<ns>/<cluster>/` in the bucket; a skip where it cannot be listed.
    pub async fn prefix_keys_in(&self, path: &str, ns: &str, cluster: &str) -> Result<Vec<String>> {
        self.platform
            .bucket_keys(&format!("{path}/{ns}/{cluster}/"))
            .await
    }

    /// Damages object `key` in the bucket; a skip where it cannot be written.
    pub async fn damage_object(&self, key: &str, damage: Damage<'_>) -> Result {
        self.platform.bucket_damage(key, damage).await
    }

    /// The scenario needs to look into the bucket.
    pub fn require_bucket(&self) -> Result {
        if self.platform.can_list_bucket() {
            Ok(())
        } else {
            Err(absent(
                Level::OwnControlPlane,
                "this platform cannot list the store",
            ))
        }
    }

    /// The scenario checks the bytes the Jobs wrote: it needs L4 and a store it can list.
    pub fn require_l4_bucket(&self) -> Result {
        self.require_l4()?;
        self.require_bucket()
    }

    /// The scenario needs real bytes through the Jobs (TUSK_E2E_L4=1).
    pub fn require_l4(&self) -> Result {
        if self.settings.l4 {
            Ok(())
        } else {
            Err(absent(
                Level::L4,
                "TUSK_E2E_L4=1 (Tusk's pods really run: real PostgreSQL, Jobs run the backup-agent)",
            ))
        }
    }

    /// What `kubectl create job NAME --from=cronjob/CRONJOB` does: the CronJob's Job template,
    /// owned by the CronJob, annotated as instantiated by hand.
    pub async fn create_job_from_cronjob(&self, cronjob: &str, name: &str) -> Result<Job> {
        let cron = Api::<CronJob>::namespaced(self.client.clone(), &self.ns)
            .get(cronjob)
            .await
            .context(format!("CronJob {}/{cronjob}", self.ns))?;
        let owner = cron
            .controller_owner_ref(&())
            .context("the CronJob has no uid")?;
        let template = cron.spec.job_template;
        let template_meta = template.metadata.unwrap_or_default();
        let mut annotations = template_meta.annotations.unwrap_or_default();
        annotations.insert("cronjob.kubernetes.io/instantiate".into(), "manual".into());
        let job = Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(self.ns.clone()),
                labels: template_meta.labels,
                annotations: Some(annotations),
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            spec: template.spec,
            ..Job::default()
        };
        Ok(self
            .jobs_in(&self.ns)
            .create(&PostParams::default(), &job)
            .await?)
    }

    /// Waits until the Job finishes; fails with its pods' exit codes unless it completed.
    pub async fn wait_job_complete(&self, name: &str) -> Result {
        let jobs = self.jobs_in(&self.ns);
        let finished = |job: &Job, type_: &str| {
            job.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
        };
        let job = until(
            format!("Job {}/{name} to finish", self.ns),
            self.timeout(),
            || async {
                let job = jobs.get(name).await?;
                if finished(&job, "Complete") || finished(&job, "Failed") {
                    Ok(Check::Done(job))
                } else {
                    Ok(Check::Pending(format!("{:?}", job.status)))
                }
            },
        )
        .await?;
        if !finished(&job, "Complete") {
            fail!(
                "Job {}/{name} failed: {}",
                self.ns,
                self.job_exit_codes(name).await?
            );
        }
        Ok(())
    }

    async fn job_exit_codes(&self, job: &str) -> Result<String> {
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &self.ns);
        let params =
            kube::api::ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
        let mut out = Vec::new();
        for pod in pods.list(&params).await? {
            let code = pod
                .status
                .and_then(|s| s.container_statuses)
                .and_then(|c| c.into_iter().next())
                .and_then(|c| c.state)
                .and_then(|s| s.terminated)
                .map(|t| t.exit_code.to_string())
                .unwrap_or_default();
            out.push(format!("{}: {code}", pod.metadata.name.unwrap_or_default()));
        }
        Ok(out.join(" "))
    }
}

/// For names that must differ between runs where the namespace does not (Job names from a
/// CronJob, as the controller makes them unique).
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl Ctx {
    /// A cluster in `ns` with S3 backups under path `lifecycle`, keeping `keep` and cleaning its
    /// prefix `on_delete` (`Retain` or `Delete`).
    pub async fn lifecycle_cluster_in(
        &self,
        ns: &str,
        name: &str,
        keep: u32,
        on_delete: &'static str,
    ) -> Result {
        let backup = manifests::S3Backup::lifecycle(keep, on_delete, &self.settings.s3_endpoint);
        self.apply_in(ns, &manifests::cluster(name, Some(&backup)))
            .await
            .map(drop)
    }

    /// Cluster `db` in the scenario's namespace, as `lifecycle_cluster_in` makes it, Ready and
    /// answering SQL: where most backup scenarios start.
    pub async fn serving_lifecycle_db(&self, keep: u32, on_delete: &'static str) -> Result {
        self.lifecycle_cluster_in(&self.ns, "db", keep, on_delete)
            .await?;
        self.wait_ready(&["db"]).await?;
        self.wait_sql("db").await
    }

    /// `serving_lifecycle_db` keeping 5 backups (`Retain`), with the seed tables in `app`: the
    /// source of the backup and restore scenarios.
    pub async fn seeded_lifecycle_db(&self) -> Result {
        self.serving_lifecycle_db(5, "Retain").await?;
        self.seed("db", "app", "app").await
    }

    /// [`Ctx::seeded_lifecycle_db`] with a Completed Backup `backup`; returns how long the
    /// Backup took from apply to Completed.
    pub async fn backed_up_lifecycle_db(&self, backup: &str) -> Result<Duration> {
        self.seeded_lifecycle_db().await?;
        self.take_backup_in(&self.ns, "db", backup).await
    }

    /// Waits for Backup `ns/name` to be deleted (by retention, say).
    pub async fn wait_backup_gone_in(&self, ns: &str, name: &str, why: &str) -> Result {
        let backups = self.backups_in(ns);
        until(
            format!("Backup {ns}/{name} to be deleted by {why}"),
            self.timeout(),
            || async {
                Ok(Check::when(
                    backups.get_opt(name).await?.is_none(),
                    "present",
                ))
            },
        )
        .await
    }

    /// The keys under `lifecycle/<ns>/<cluster>/`.
    pub async fn lifecycle_keys(&self, ns: &str, cluster: &str) -> Result<Vec<String>> {
        self.prefix_keys_in("lifecycle", ns, cluster).await
    }

    /// Damages the object of backup `backup` of the lifecycle cluster `db` in `ns` (under
    /// `lifecycle/`) whose name starts with `file` (`db-app.` is the dump of database `app`,
    /// `manifest.json` the manifest); returns its key.
    pub async fn damage_backup_in(
        &self,
        ns: &str,
        backup: &str,
        file: &str,
        damage: Damage<'_>,
    ) -> Result<String> {
        let keys = self.lifecycle_keys(ns, "db").await?;
        let prefix = format!("lifecycle/{ns}/db/{backup}/{file}");
        let Some(key) = keys.into_iter().find(|k| k.starts_with(&prefix)) else {
            fail!("no object under {prefix}");
        };
        self.damage_object(&key, damage).await?;
        Ok(key)
    }
}
