//! An in-place upgrade's steps, taken (the plan: `in_place_plan.rs`): the set stopped by the
//! record alone (`Cluster::stopped_for_upgrade` gives its StatefulSet no pods), the Job made
//! and read, and the switch: the replicas' volumes deleted so they clone the new system, the
//! Lease given that system's identifier (its holder refuses data of another system), the
//! status naming the new major.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};

use super::plan::{JobOutcome, Phase};
use super::record::{Progress, Switched, in_phase};
use super::steps::MOVING;
use super::{Run, sets};
use crate::crd::UpgradeStatus;
use crate::error::{Error, Result};
use crate::resources::storage::claim_names;
use crate::resources::{InPlaceRun, UPGRADE_CONTAINER, in_place_job, in_place_job_name};
use crate::runtime::apply::{create, delete};

impl Run<'_> {
    /// Phase `Stopping`: the next apply of the StatefulSet has no pods.
    pub(super) async fn stop(&self, recorded: UpgradeStatus) -> Progress {
        let note = format!(
            "stopping every instance of {} for pg_upgrade: the database is down until PostgreSQL \
             {} serves",
            recorded.from_set, recorded.to
        );
        self.event("UpgradeStopping", note.clone()).await;
        let mut record = in_phase(recorded, Phase::Stopping, self.now);
        record.message = Some(note);
        self.moved(record, MOVING)
    }

    /// The Job, made unless it exists; phase `Linking`.
    pub(super) async fn link(&self, recorded: UpgradeStatus) -> Result<Progress> {
        let pod = self.upgraded_pod(&recorded)?;
        let to_image = crate::resources::postgres_image(self.cluster.spec);
        let run = InPlaceRun {
            from: u32::try_from(recorded.from).unwrap_or_default(),
            to: u32::try_from(recorded.to).unwrap_or_default(),
            from_image: &recorded.from_image,
            to_image: &to_image,
            pod: &pod,
        };
        let job = in_place_job(self.cluster, &self.ctx.agent, &run);
        create(&self.jobs(), &job).await?;
        let note = format!(
            "pg_upgrade --link of {pod}'s volume from PostgreSQL {} to {} (Job {})",
            recorded.from,
            recorded.to,
            in_place_job_name(self.cluster, run.to)
        );
        if recorded.phase != Phase::Linking {
            self.event("UpgradeLinking", note.clone()).await;
        }
        let mut record = in_phase(recorded, Phase::Linking, self.now);
        record.message = Some(note);
        Ok(self.moved(record, MOVING))
    }

    /// What the Job came to: `None` before it exists.
    pub(super) async fn job_outcome(&self, recorded: &UpgradeStatus) -> Result<Option<JobOutcome>> {
        let to = u32::try_from(recorded.to).unwrap_or_default();
        let name = in_place_job_name(self.cluster, to);
        let job = self
            .jobs()
            .get_opt(&name)
            .await
            .map_err(|source| Error::Read {
                kind: "Job".to_owned(),
                name: name.clone(),
                source,
            })?;
        let Some(job) = job else {
            return Ok(None);
        };
        let status = job.status.unwrap_or_default();
        let failed =
            (status.conditions.iter().flatten()).any(|c| c.type_ == "Failed" && c.status == "True");
        if status.succeeded.unwrap_or(0) == 0 && !failed {
            return Ok(Some(JobOutcome::Running));
        }
        let report = self.report(&name).await?;
        if !failed && let Some(id) = report.get("systemIdentifier").and_then(|v| v.as_str()) {
            return Ok(Some(JobOutcome::Succeeded {
                system_identifier: id.to_owned(),
            }));
        }
        let why = (report.get("error").and_then(|v| v.as_str()))
            .map(str::to_owned)
            .unwrap_or_else(|| {
                format!("Job {name} failed without saying why (its pods' logs may)")
            });
        Ok(Some(JobOutcome::Failed { why }))
    }

    /// The newest termination message of the Job's upgrade container, as JSON.
    async fn report(&self, job: &str) -> Result<serde_json::Value> {
        let pods: Api<Pod> = Api::namespaced(self.ctx.client.clone(), self.cluster.namespace);
        let list = pods
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await
            .map_err(|source| Error::Read {
                kind: "Pod".to_owned(),
                name: format!("job-name={job}"),
                source,
            })?;
        let mut finished: Vec<(String, String)> = (list.items.iter())
            .flat_map(|pod| {
                pod.status
                    .iter()
                    .flat_map(|s| s.container_statuses.iter().flatten())
            })
            .filter(|c| c.name == UPGRADE_CONTAINER)
            .filter_map(|c| c.state.as_ref()?.terminated.as_ref())
            .filter_map(|t| {
                let at = t
                    .finished_at
                    .as_ref()
                    .map(|f| f.0.to_string())
                    .unwrap_or_default();
                Some((at, t.message.clone()?))
            })
            .collect();
        finished.sort();
        let message = finished.pop().map(|(_, m)| m).unwrap_or_default();
        Ok(serde_json::from_str(&message).unwrap_or_else(|_| {
            let said: String = message.chars().take(2000).collect();
            serde_json::json!({ "error": said })
        }))
    }

    /// Upgraded: the replicas' volumes go (they clone the new system), the Lease names that
    /// system, the status the new major; phase `Starting`. Each step can be taken again.
    pub(super) async fn switch_in_place(
        &self,
        recorded: UpgradeStatus,
        system_identifier: String,
    ) -> Result<Progress> {
        let pod = self.upgraded_pod(&recorded)?;
        let kept = format!("{}-{pod}", crate::resources::storage::DATA_CLAIM);
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.ctx.client.clone(), self.cluster.namespace);
        for claim in claim_names(self.cluster).into_iter().filter(|c| *c != kept) {
            delete(&claims, &claim).await?;
        }
        sets::record_system(self.cluster, &system_identifier, self.ctx).await?;
        let took = super::record::view(&recorded, self.now).in_phase;
        let note = format!(
            "pg_upgrade upgraded {pod}'s volume to PostgreSQL {} in {:.0} s; the set starts on \
             it, its replicas cloned again",
            recorded.to,
            took.as_secs_f64()
        );
        self.event("UpgradeSwitched", note.clone()).await;
        let switched = Switched {
            set: recorded.from_set.clone(),
            version: recorded.to,
            image: crate::resources::postgres_image(self.cluster.spec),
            primary: Some(pod),
            system_identifier: Some(system_identifier),
        };
        let mut record = in_phase(recorded, Phase::Starting, self.now);
        record.message = Some(note);
        Ok(Progress {
            switched: Some(switched),
            ..self.moved(record, MOVING)
        })
    }

    /// pg_upgrade failed: the Job goes, the set starts again on the old major (its directory
    /// is whole), and no upgrade starts again until the spec changes.
    pub(super) async fn fail(&self, recorded: &UpgradeStatus, why: &str) -> Result<Progress> {
        let to = u32::try_from(recorded.to).unwrap_or_default();
        delete(&self.jobs(), &in_place_job_name(self.cluster, to)).await?;
        let note = format!(
            "pg_upgrade from PostgreSQL {} to {} failed; {} serves again, unchanged. Fix what \
             it says, then change the spec (spec.version back and up again) to try again: {why}",
            recorded.from, recorded.to, recorded.from
        );
        self.warn("UpgradeFailed", note.clone()).await;
        Ok(Progress {
            record: None,
            switched: None,
            condition: Some((false, "UpgradeFailed", note)),
            recheck: Some(MOVING),
        })
    }

    /// The upgraded primary serves: the Job goes, the record ends.
    pub(super) async fn finish(&self, recorded: &UpgradeStatus) -> Result<Progress> {
        let to = u32::try_from(recorded.to).unwrap_or_default();
        delete(&self.jobs(), &in_place_job_name(self.cluster, to)).await?;
        // The upgraded cluster is a new system: with archiving on, its first restore point.
        let backup = crate::resources::wal_archiving(self.cluster).is_some();
        let asked = super::owed_backup::after(self.cluster.name, recorded);
        if backup {
            super::owed_backup::ask(self.cluster, &asked, self.ctx).await?;
        }
        let took = super::record::view(recorded, self.now).in_phase;
        let note = format!(
            "upgraded in place from PostgreSQL {} to {}; the primary serves ({:.0} s after the \
             switch), the replicas clone{}",
            recorded.from,
            recorded.to,
            took.as_secs_f64(),
            if backup {
                format!("; base backup {asked} of the new system asked for")
            } else {
                String::new()
            }
        );
        self.event("Upgraded", note.clone()).await;
        Ok(Progress {
            record: None,
            switched: None,
            condition: Some((false, "Upgraded", note)),
            recheck: None,
        })
    }

    /// Cancelled while stopping: the record ends and the set starts again on the old major.
    pub(super) async fn in_place_cancel(&self, recorded: &UpgradeStatus, why: &str) -> Progress {
        let note = format!(
            "the upgrade from {} to {} is cancelled, {} starts again unchanged: {why}",
            recorded.from, recorded.to, recorded.from
        );
        self.warn("UpgradeCancelled", note.clone()).await;
        Progress {
            record: None,
            switched: None,
            condition: Some((false, "UpgradeCancelled", note)),
            recheck: Some(MOVING),
        }
    }

    /// The primary whose volume is upgraded (recorded at the start).
    #[expect(
        clippy::result_large_err,
        reason = "the error every reconcile step returns; the async steps return it unboxed too"
    )]
    fn upgraded_pod(&self, recorded: &UpgradeStatus) -> Result<String> {
        (recorded.pod.clone())
            .or_else(|| self.old_primary.map(str::to_owned))
            .ok_or_else(|| Error::Upgrade {
                step: "choosing the volume to upgrade",
                pod: String::new(),
                reason: "no primary is recorded".into(),
            })
    }

    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.ctx.client.clone(), self.cluster.namespace)
    }
}
