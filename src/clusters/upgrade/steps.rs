//! The plan's steps, taken: each one's calls to the managers and the sets' objects, then the
//! record it leaves, the `Upgrading` condition and one Event.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tusk_contract::upgrade_target::CopyRequest;

use super::plan::{Method, Phase, Step};
use super::record::{Progress, Switched, in_phase};
use super::{Run, sets};
use crate::clusters::report;
use crate::crd::UpgradeStatus;
use crate::error::Result;
use crate::resources::POSTGRES_PORT;
use crate::runtime::events::{normal, warning};

/// How soon to look again while an upgrade moves, and while it waits for the user.
pub(super) const MOVING: Duration = Duration::from_secs(2);
const CUTTING_OVER: Duration = Duration::from_millis(250);
const REFUSED: Duration = Duration::from_secs(60);

impl Run<'_> {
    /// Takes `step`; a failure leaves the record as it was, saying what failed.
    pub(super) async fn take(&self, step: Step) -> Progress {
        match self.take_step(step).await {
            Ok(progress) => progress,
            Err(error) => self.failed(&error.to_string()),
        }
    }

    /// The record unchanged but for its message; looked at again soon.
    pub(super) fn failed(&self, message: &str) -> Progress {
        let record = self.recorded.cloned().map(|mut record| {
            record.message = Some(message.to_owned());
            record
        });
        let condition = record.as_ref().map(|r| condition(r, true));
        Progress {
            record,
            switched: None,
            condition,
            recheck: Some(MOVING),
        }
    }

    async fn take_step(&self, step: Step) -> Result<Progress> {
        let Some(recorded) = self.recorded.cloned() else {
            return Ok(match step {
                Step::Start { from, to, new_set } => self.start(from, to, new_set).await,
                _ => Progress::default(),
            });
        };
        let cluster = self.cluster;
        let next = |phase: Phase, message: Option<String>| UpgradeStatus {
            message,
            ..in_phase(recorded.clone(), phase, self.now)
        };
        match step {
            Step::Idle | Step::Start { .. } => Ok(Progress::default()),
            Step::Wait(what) => {
                let pace = match recorded.phase {
                    Phase::CuttingOver => CUTTING_OVER,
                    _ => MOVING,
                };
                let message = format!("waiting for {what}");
                Ok(self.moved(next(recorded.phase, Some(message)), pace))
            }
            Step::Refuse(reasons) => Ok(self.refused(&recorded, reasons.join("; ")).await),
            Step::EnableLogicalWal => {
                let why = "wal_level is replica: set spec.parameters.wal_level to \
                           logical (each instance restarts once) and the upgrade goes on"
                    .to_owned();
                Ok(self.refused(&recorded, why).await)
            }
            Step::Provision => {
                sets::ensure_lease(&cluster.set(&recorded.new_set), self.ctx).await?;
                let note = format!(
                    "creating {} on PostgreSQL {} beside the serving {}",
                    recorded.new_set, recorded.to, recorded.from
                );
                self.event("UpgradeProvisioning", note.clone()).await;
                Ok(self.moved(next(Phase::Provisioning, Some(note)), MOVING))
            }
            Step::Copy { failed } => self.copy(recorded, failed).await,
            Step::Freeze => {
                let frozen = self.old()?.freeze().await?;
                let note = format!(
                    "writes paused on {} at {}: the new set catches up",
                    self.old_primary.unwrap_or_default(),
                    frozen.lsn
                );
                self.event("UpgradeCuttingOver", note.clone()).await;
                let mut record = next(Phase::CuttingOver, Some(note));
                record.frozen_lsn = Some(frozen.lsn);
                Ok(self.moved(record, CUTTING_OVER))
            }
            Step::Thaw => {
                self.old()?.thaw().await?;
                let note = "the new set did not confirm the final position in time: writes \
                            resumed on the old primary, the cut-over is tried again"
                    .to_owned();
                self.warn("UpgradeCutOverRetried", note.clone()).await;
                let mut record = next(Phase::Copying, Some(note));
                record.frozen_lsn = None;
                Ok(self.moved(record, MOVING))
            }
            Step::Switch { fenced } => self.switch(recorded, fenced).await,
            Step::Retire { delete } => self.retire(recorded, delete).await,
            Step::AskBaseBackup => {
                let before = recorded.phase == Phase::Preflight;
                let name = match before {
                    true => super::owed_backup::before(cluster.name, &recorded),
                    false => super::owed_backup::after(cluster.name, &recorded),
                };
                super::owed_backup::ask(cluster, &name, self.ctx).await?;
                let note = match before {
                    true => format!(
                        "asked for base backup {name} of PostgreSQL {}, the point a restore \
                         goes back to: the database stops for pg_upgrade once it completes",
                        recorded.from
                    ),
                    false => format!(
                        "asked for base backup {name} of PostgreSQL {}: {} is kept until it \
                         completes",
                        recorded.to, recorded.from_set
                    ),
                };
                self.event("UpgradeBaseBackup", note.clone()).await;
                Ok(self.moved(next(recorded.phase, Some(note)), MOVING))
            }
            Step::Cancel { why } if recorded.method == Method::InPlace => {
                Ok(self.in_place_cancel(&recorded, &why).await)
            }
            Step::Cancel { why } => {
                // Writes resume at once; the new set goes in the next step, once the record
                // no longer asks the children step to apply it.
                self.old()?.thaw().await?;
                self.event("UpgradeCancelling", format!("undoing the upgrade: {why}"))
                    .await;
                Ok(self.moved(next(Phase::Cancelling, Some(why)), MOVING))
            }
            Step::Undo => self.undo(recorded).await,
            Step::Stop => Ok(self.stop(recorded).await),
            Step::Link => self.link(recorded).await,
            Step::SwitchInPlace { system_identifier } => {
                self.switch_in_place(recorded, system_identifier).await
            }
            Step::Fail { why } => self.fail(&recorded, &why).await,
            Step::Finish => self.finish(&recorded).await,
        }
    }

    async fn start(&self, from: u32, to: u32, new_set: String) -> Progress {
        let method = crate::crd::UpgradeSpec::method(self.cluster.spec.upgrade.as_ref());
        let in_place = method == Method::InPlace;
        let record = UpgradeStatus {
            from: i32::try_from(from).unwrap_or_default(),
            to: i32::try_from(to).unwrap_or_default(),
            phase: Phase::Preflight,
            phase_since: Some(Time(self.now)),
            from_set: self.cluster.instance_set.to_owned(),
            // In place, the set stays the set.
            new_set: if in_place {
                self.cluster.instance_set.to_owned()
            } else {
                new_set
            },
            from_image: self.cluster.postgres_image(),
            copy_from: None,
            method,
            pod: in_place
                .then(|| self.old_primary.map(str::to_owned))
                .flatten(),
            frozen_lsn: None,
            message: None,
        };
        let note = if in_place {
            format!("upgrading from PostgreSQL {from} to {to} in place: stopping every instance")
        } else {
            format!("upgrading from PostgreSQL {from} to {to}: checking the databases")
        };
        self.event("UpgradeStarted", note).await;
        self.moved(record, Duration::ZERO)
    }

    /// Published on the old primary, asked to copy on the new one (both idempotent: also the
    /// way on after a failed copy, `failed` saying why it failed).
    async fn copy(&self, recorded: UpgradeStatus, failed: Option<String>) -> Result<Progress> {
        let old = self.old()?;
        let Some(new) = self.new_primary().await? else {
            let message = format!("waiting for the new set {}'s primary", recorded.new_set);
            return Ok(self.moved(
                UpgradeStatus {
                    message: Some(message),
                    ..recorded
                },
                MOVING,
            ));
        };
        let published = old.publish().await?;
        new.copy(&self.copy_request(published.databases)).await?;
        let failed_before = recorded.phase == Phase::Copying;
        let note = format!(
            "copying every database from {} into {}",
            self.old_primary.unwrap_or_default(),
            new.address.pod
        );
        if failed_before {
            let why = (failed.or_else(|| recorded.message.clone())).unwrap_or_default();
            self.warn("UpgradeCopyRetried", format!("{note} again ({why})"))
                .await;
        } else {
            self.event("UpgradeCopying", note.clone()).await;
        }
        let mut record = in_phase(recorded, Phase::Copying, self.now);
        record.message = Some(note);
        record.copy_from = self.old_primary.map(str::to_owned);
        Ok(self.moved(record, MOVING))
    }

    fn copy_request(
        &self,
        databases: Vec<tusk_contract::upgrade_source::PublishedDatabase>,
    ) -> CopyRequest {
        let primary = self.old_primary.unwrap_or_default();
        CopyRequest {
            host: format!("{primary}.{}", self.cluster.peer_domain()),
            port: u16::try_from(POSTGRES_PORT).unwrap_or(5432),
            databases,
        }
    }

    /// The point of no return: the sequences carried and the copy detached, the old set's
    /// Lease emptied (its primary fences), the new set named as the serving one. `fenced`: the
    /// Lease was emptied by an earlier reconcile, after the new side finished, and only the
    /// record is left (the old primary no longer answers).
    async fn switch(&self, recorded: UpgradeStatus, fenced: bool) -> Result<Progress> {
        let Some(new) = self.new_primary().await? else {
            let message = "waiting for the new set's primary to finish".to_owned();
            return Ok(self.moved(
                UpgradeStatus {
                    message: Some(message),
                    ..recorded
                },
                CUTTING_OVER,
            ));
        };
        let carried = if fenced {
            "sequences carried before the old set was fenced".to_owned()
        } else {
            let published = self.old()?.publish().await?;
            let finished = new.finish(&self.copy_request(published.databases)).await?;
            sets::fence_for_switch(self.cluster, &recorded.new_set, self.ctx).await?;
            format!("{} sequences carried", finished.sequences)
        };
        let new_set = self.cluster.set(&recorded.new_set);
        let system_identifier = sets::system_identifier(&new_set, self.ctx).await?;
        let gap = super::record::view(&recorded, self.now).in_phase;
        let note = format!(
            "PostgreSQL {} serves from {} ({carried}; writes paused for {:.1} s); {} is kept, \
             stopped, for {} s",
            recorded.to,
            new.address.pod,
            gap.as_secs_f64(),
            recorded.from_set,
            self.keep_old_for().as_secs()
        );
        self.event("UpgradeSwitched", note.clone()).await;
        let switched = Switched {
            set: recorded.new_set.clone(),
            version: recorded.to,
            image: crate::resources::postgres_image(self.cluster.spec),
            primary: Some(new.address.pod.clone()),
            system_identifier,
        };
        let mut record = in_phase(recorded, Phase::Retiring, self.now);
        record.message = Some(note);
        record.frozen_lsn = None;
        Ok(Progress {
            switched: Some(switched),
            ..self.moved(record, Duration::ZERO)
        })
    }

    async fn retire(&self, recorded: UpgradeStatus, delete: bool) -> Result<Progress> {
        let old = self.cluster.set(&recorded.from_set);
        if !delete {
            sets::scale_to_zero(&old, self.ctx).await?;
            let pace = (self.keep_old_for() / 10).max(MOVING);
            return Ok(self.moved(recorded, pace));
        }
        sets::remove(&old, self.ctx).await?;
        let note = format!(
            "upgraded from PostgreSQL {} to {}: {} and its volumes deleted",
            recorded.from, recorded.to, recorded.from_set
        );
        self.event("Upgraded", note.clone()).await;
        Ok(Progress {
            record: None,
            switched: None,
            condition: Some((false, "Upgraded", note)),
            recheck: None,
        })
    }

    /// Back to the old major serving, unchanged: thawed, unpublished, the new set deleted.
    ///
    /// The new set removed in an order that cannot wait on itself: its pods stop first (their
    /// subscription holds walsenders on the old primary, whose unpublish waits for its slots to
    /// go idle), then the old primary drops the copy's slots and publication — naming the new
    /// side's system, whose table synchronisation left slots of its own — then the set goes.
    async fn undo(&self, recorded: UpgradeStatus) -> Result<Progress> {
        let old = self.old()?;
        old.thaw().await?;
        let new_set = self.cluster.set(&recorded.new_set);
        sets::scale_to_zero(&new_set, self.ctx).await?;
        // A new side that never bootstrapped has no identifier, and no slots (the copy starts
        // once its primary serves).
        let subscriber = sets::system_identifier_if_any(&new_set, self.ctx).await?;
        old.unpublish(subscriber).await?;
        sets::remove(&new_set, self.ctx).await?;
        let why = recorded.message.as_deref().unwrap_or("cancelled");
        let note = format!(
            "the upgrade from {} to {} is undone, {} serving unchanged: {why}",
            recorded.from, recorded.to, recorded.from
        );
        self.warn("UpgradeCancelled", note.clone()).await;
        Ok(Progress {
            record: None,
            switched: None,
            condition: Some((false, "UpgradeCancelled", note)),
            recheck: Some(MOVING),
        })
    }

    /// Refused until the user changes what the upgrade cannot carry: asked again each minute,
    /// the Event published when the reason changes.
    async fn refused(&self, recorded: &UpgradeStatus, why: String) -> Progress {
        let message = format!("refused: {why}");
        if recorded.message.as_deref() != Some(&message) {
            self.warn("UpgradeRefused", message.clone()).await;
        }
        let record = UpgradeStatus {
            message: Some(message),
            ..recorded.clone()
        };
        Progress {
            condition: Some(condition(&record, false)),
            ..self.moved(record, REFUSED)
        }
    }

    pub(super) fn moved(&self, record: UpgradeStatus, recheck: Duration) -> Progress {
        Progress {
            condition: Some(condition(&record, true)),
            record: Some(record),
            switched: None,
            recheck: Some(recheck),
        }
    }

    pub(super) async fn event(&self, reason: &str, note: String) {
        report::publish(self.ctx, self.pg, normal(reason, "Upgrade", note)).await;
    }

    pub(super) async fn warn(&self, reason: &str, note: String) {
        report::publish(self.ctx, self.pg, warning(reason, "Upgrade", note)).await;
    }
}

/// `Upgrading` for `record`: its phase as the reason (`UpgradeRefused` when refused).
fn condition(record: &UpgradeStatus, moving: bool) -> (bool, &'static str, String) {
    let reason = match (moving, record.phase) {
        (false, _) => "UpgradeRefused",
        (true, Phase::Preflight) => "Preflight",
        (true, Phase::Provisioning) => "Provisioning",
        (true, Phase::Copying) => "Copying",
        (true, Phase::CuttingOver) => "CuttingOver",
        (true, Phase::Retiring) => "Retiring",
        (true, Phase::Cancelling) => "Cancelling",
        (true, Phase::Stopping) => "Stopping",
        (true, Phase::Linking) => "Linking",
        (true, Phase::Starting) => "Starting",
    };
    let message = record
        .message
        .clone()
        .unwrap_or_else(|| format!("upgrading from PostgreSQL {} to {}", record.from, record.to));
    (moving, reason, message)
}
