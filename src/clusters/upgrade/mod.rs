//! An online major-version upgrade, carried out (docs/src/design/major-upgrades.md). Each
//! reconcile reads only what the recorded phase needs (the old primary's preflight, the new
//! set's Lease and copy progress, the confirmation of the frozen position), asks
//! [`plan::plan`] for the next step and takes it ([`steps`]). What it returns is written with
//! the status: the record (`status.upgrade`), the switch, the `Upgrading` condition.
//!
//! A manager that does not answer never fails the reconcile (the database serves on and its
//! Ready condition must not say otherwise): the record says what failed and the step is taken
//! again a few seconds later.

mod calls;
mod in_place;
mod in_place_plan;
mod owed_backup;
pub mod plan;
mod record;
mod sets;
mod steps;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use self::calls::Manager;
use self::plan::{Observed, Phase};
pub use self::record::{Progress, Switched, apply_to};
use super::ha::PrimaryState;
use super::ha::pods::{cluster_pods, known_instance_address};
use crate::crd::{PostgreSQL, UpgradeStatus};
use crate::resources::Cluster;
use crate::runtime::Context;

/// The upgrade's step of this reconcile; `primary` is the serving set's primary step.
pub async fn step(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    primary: &PrimaryState,
    ctx: &Context,
) -> Progress {
    let recorded = pg.status.as_ref().and_then(|s| s.upgrade.as_ref());
    let declared = cluster.spec.version.major();
    if recorded.is_none() && declared <= cluster.serving_major {
        return Progress::default();
    }
    let now = Timestamp::now();
    let run = Run {
        pg,
        cluster,
        ctx,
        old_primary: primary.current.as_deref(),
        recorded,
        now,
    };
    let record = recorded.map(|r| record::view(r, now));
    let (observed, failure) = match run.observe(recorded, declared).await {
        Ok(observed) => (observed, None),
        Err(error) => (Observations::none(declared, cluster, pg), Some(error)),
    };
    let step = decide(cluster.name, record.as_ref(), &observed.seen());
    if let Some(error) = failure {
        // What the plan needs could not be read: nothing is taken on a guess.
        return run.failed(&error.to_string());
    }
    Box::pin(run.take(step)).await
}

/// The next step: the in-place plan for an in-place record, the online plan otherwise (which
/// also starts an upgrade of either method).
fn decide(name: &str, record: Option<&plan::UpgradeRecord>, seen: &plan::Observed) -> plan::Step {
    match record {
        Some(record) if record.method == plan::Method::InPlace => in_place_plan::plan(record, seen),
        _ => plan::plan(name, record, seen),
    }
}

/// What one reconcile of an upgrade works with.
struct Run<'a> {
    pg: &'a PostgreSQL,
    cluster: &'a Cluster<'a>,
    ctx: &'a Context,
    /// The serving set's Lease holder.
    old_primary: Option<&'a str>,
    recorded: Option<&'a UpgradeStatus>,
    now: Timestamp,
}

/// What was read for the plan, owned (the plan borrows it).
struct Observations {
    declared: u32,
    serving: u32,
    preflight: Option<tusk_contract::upgrade::UpgradePreflight>,
    new_primary_ready: bool,
    copy: Option<tusk_contract::upgrade_target::CopyProgress>,
    confirmed: Option<bool>,
    fenced_for_switch: bool,
    failed_over: bool,
    keep_old_elapsed: bool,
    owed_base_backup: plan::OwedBaseBackup,
    method: plan::Method,
    failed_at_this_generation: bool,
    set_pods: usize,
    job: Option<plan::JobOutcome>,
    primary_serving: bool,
}

impl Observations {
    fn none(declared: u32, cluster: &Cluster<'_>, pg: &PostgreSQL) -> Self {
        Observations {
            method: crate::crd::UpgradeSpec::method(cluster.spec.upgrade.as_ref()),
            failed_at_this_generation: failed_at_this_generation(pg),
            set_pods: 0,
            job: None,
            primary_serving: false,
            declared,
            serving: cluster.serving_major,
            preflight: None,
            new_primary_ready: false,
            copy: None,
            confirmed: None,
            fenced_for_switch: false,
            failed_over: false,
            keep_old_elapsed: false,
            owed_base_backup: plan::OwedBaseBackup::NotOwed,
        }
    }

    fn seen(&self) -> Observed<'_> {
        Observed {
            declared: self.declared,
            serving: self.serving,
            preflight: self.preflight.as_ref(),
            new_primary_ready: self.new_primary_ready,
            copy: self.copy.as_ref(),
            confirmed: self.confirmed,
            fenced_for_switch: self.fenced_for_switch,
            failed_over: self.failed_over,
            keep_old_elapsed: self.keep_old_elapsed,
            owed_base_backup: self.owed_base_backup.clone(),
            method: self.method,
            failed_at_this_generation: self.failed_at_this_generation,
            set_pods: self.set_pods,
            job: self.job.clone(),
            primary_serving: self.primary_serving,
        }
    }
}

/// Whether `Upgrading` says an in-place upgrade failed at the spec's current generation.
fn failed_at_this_generation(pg: &PostgreSQL) -> bool {
    let conditions = pg.status.as_ref().map(|s| s.conditions.as_slice());
    (conditions.unwrap_or_default().iter()).any(|c| {
        c.type_ == crate::crd::conditions::UPGRADING
            && c.reason == "UpgradeFailed"
            && c.observed_generation.is_some()
            && c.observed_generation == pg.metadata.generation
    })
}

impl Run<'_> {
    async fn observe(
        &self,
        recorded: Option<&UpgradeStatus>,
        declared: u32,
    ) -> crate::error::Result<Observations> {
        let mut seen = Observations::none(declared, self.cluster, self.pg);
        let Some(recorded) = recorded else {
            return Ok(seen);
        };
        seen.failed_over = recorded.copy_from.as_deref().is_some_and(|from| {
            matches!(recorded.phase, Phase::Copying | Phase::CuttingOver)
                && self.old_primary != Some(from)
        });
        match recorded.phase {
            Phase::Preflight if recorded.method == plan::Method::InPlace => {
                let asked = owed_backup::before(self.cluster.name, recorded);
                seen.owed_base_backup = self.owed_base_backup(&asked);
            }
            Phase::Preflight => seen.preflight = Some(self.old()?.preflight().await?),
            Phase::Provisioning => seen.new_primary_ready = self.new_primary().await?.is_some(),
            Phase::Copying if !seen.failed_over => {
                // Not ready or not answering: asked to copy again, which it answers once up.
                seen.copy = match self.new_primary().await? {
                    Some(new) => new.progress().await.ok(),
                    None => None,
                };
            }
            Phase::CuttingOver => {
                // Read first: once fenced, the old primary answers nothing any more.
                seen.fenced_for_switch =
                    sets::fenced_for(self.cluster, &recorded.new_set, self.ctx).await?;
                if let Some(lsn) = (recorded.frozen_lsn.as_ref())
                    .filter(|_| !seen.fenced_for_switch && !seen.failed_over)
                {
                    let confirmation = self.old()?.confirmed(lsn).await?;
                    seen.confirmed = Some(confirmation.confirmed());
                }
            }
            Phase::Retiring => {
                let since = record::view(recorded, self.now).in_phase;
                seen.keep_old_elapsed = since >= self.keep_old_for();
                if seen.keep_old_elapsed {
                    let asked = owed_backup::after(self.cluster.name, recorded);
                    seen.owed_base_backup = self.owed_base_backup(&asked);
                }
            }
            Phase::Stopping => seen.set_pods = cluster_pods(self.ctx, self.cluster).len(),
            Phase::Linking => seen.job = self.job_outcome(recorded).await?,
            Phase::Starting => {
                let pods = cluster_pods(self.ctx, self.cluster);
                let primary = recorded.pod.as_deref();
                seen.primary_serving =
                    (pods.iter()).any(|p| Some(p.name.as_str()) == primary && p.ready);
            }
            _ => {}
        }
        Ok(seen)
    }

    /// Where the base backup `asked` of the serving system stands (after an online switch the
    /// serving system is the new one; before an in-place stop, the old one).
    fn owed_base_backup(&self, asked: &str) -> plan::OwedBaseBackup {
        let cluster = self.cluster;
        let backups = (self.ctx.caches.backups_by_cluster).objects(cluster.namespace, cluster.name);
        let system = self
            .pg
            .status
            .as_ref()
            .and_then(|s| s.system_identifier.as_deref());
        owed_backup::judge(
            crate::resources::wal_archiving(cluster).is_some(),
            system,
            asked,
            backups.iter().map(AsRef::as_ref),
        )
    }

    /// How long the old set is kept, stopped, after the switch (`spec.upgrade`).
    fn keep_old_for(&self) -> Duration {
        crate::crd::UpgradeSpec::keep_old_for(self.cluster.spec.upgrade.as_ref())
    }

    /// The serving set's primary's manager.
    #[expect(
        clippy::result_large_err,
        reason = "the error every reconcile step returns; the async steps return it unboxed too"
    )]
    fn old(&self) -> crate::error::Result<Manager<'_>> {
        let holder = self.old_primary.unwrap_or_default();
        self.manager(self.cluster, holder)
            .ok_or_else(|| crate::error::Error::Upgrade {
                step: "reaching the old primary",
                pod: holder.to_owned(),
                reason: "it has no address yet".into(),
            })
    }

    /// The new set's primary's manager, once its pod is ready.
    async fn new_primary(&self) -> crate::error::Result<Option<Manager<'_>>> {
        let Some(recorded) = self.recorded else {
            return Ok(None);
        };
        let set = self.cluster.set(&recorded.new_set);
        let Some(holder) = sets::ensure_lease(&set, self.ctx).await? else {
            return Ok(None);
        };
        let pods = cluster_pods(self.ctx, &set);
        let ready = pods.iter().any(|p| p.name == holder && p.ready);
        Ok(ready.then(|| self.manager(&set, &holder)).flatten())
    }

    fn manager(&self, set: &Cluster<'_>, pod: &str) -> Option<Manager<'_>> {
        let pods = cluster_pods(self.ctx, set);
        let pod = pods.iter().find(|p| p.name == pod)?;
        Some(Manager {
            ctx: self.ctx,
            address: known_instance_address(self.ctx, set, pod)?,
        })
    }
}
