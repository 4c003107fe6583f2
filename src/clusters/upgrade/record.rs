//! What an upgrade's reconcile hands to the status (`Progress`), and the record as the plan
//! reads it: pure, so the status an upgrade leaves is tested on plain values.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::plan::{Phase, UpgradeRecord};
use crate::crd::conditions::UPGRADING;
use crate::crd::{PostgreSQLStatus, UpgradeStatus};
use crate::runtime::conditions::{self, Update};

/// What the status becomes after this reconcile's upgrade step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    /// `status.upgrade`: `None` when there is no upgrade or it just ended.
    pub record: Option<UpgradeStatus>,
    /// The switch happened in this reconcile.
    pub switched: Option<Switched>,
    /// `Upgrading`, when an upgrade ran (left as it was otherwise).
    pub condition: Option<(bool, &'static str, String)>,
    /// Look again this soon.
    pub recheck: Option<Duration>,
}

/// The serving set after the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switched {
    pub set: String,
    pub version: i32,
    pub image: String,
    /// The new set's Lease holder.
    pub primary: Option<String>,
    /// The new system's identifier, as its first primary recorded it on its Lease: what the
    /// archive's WAL prefix and the bucket cleanup follow from the switch on.
    pub system_identifier: Option<String>,
}

/// The record as the plan reads it, its time in phase by `now`.
pub fn view(status: &UpgradeStatus, now: Timestamp) -> UpgradeRecord {
    let in_phase = (status.phase_since.as_ref())
        .and_then(|since| Duration::try_from(now.duration_since(since.0)).ok())
        .unwrap_or_default();
    UpgradeRecord {
        from: u32::try_from(status.from).unwrap_or_default(),
        to: u32::try_from(status.to).unwrap_or_default(),
        method: status.method,
        phase: status.phase,
        new_set: status.new_set.clone(),
        frozen_lsn: status.frozen_lsn.clone(),
        in_phase,
    }
}

/// `record` in `phase` from `now` on (its time kept when the phase is unchanged).
pub fn in_phase(mut record: UpgradeStatus, phase: Phase, now: Timestamp) -> UpgradeStatus {
    if record.phase != phase || record.phase_since.is_none() {
        record.phase = phase;
        record.phase_since = Some(Time(now));
    }
    record
}

/// Writes `progress` into `status` (after everything else the reconcile computed: the switch
/// replaces the serving set's primary, major, image and system identifier).
pub fn apply_to(
    status: &mut PostgreSQLStatus,
    progress: &Progress,
    generation: Option<i64>,
    now: &Time,
) {
    status.upgrade.clone_from(&progress.record);
    if let Some(switched) = &progress.switched {
        status.instance_set = Some(switched.set.clone());
        status.version = Some(switched.version);
        status.image = Some(switched.image.clone());
        status.current_primary.clone_from(&switched.primary);
        status
            .system_identifier
            .clone_from(&switched.system_identifier);
        status.instance_states.clear();
    }
    if let Some((up, reason, message)) = &progress.condition {
        let update = Update {
            type_: UPGRADING,
            status: *up,
            reason,
            message: message.clone(),
        };
        conditions::set(&mut status.conditions, update, generation, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(phase: Phase) -> UpgradeStatus {
        UpgradeStatus {
            from: 15,
            to: 17,
            phase,
            phase_since: None,
            from_set: "demo".into(),
            new_set: "demo-v17".into(),
            from_image: "postgres:15".into(),
            copy_from: Some("demo-0".into()),
            method: crate::crd::UpgradeMethod::Online,
            pod: None,
            frozen_lsn: None,
            message: None,
        }
    }

    #[test]
    fn a_phase_keeps_its_start_until_it_changes() {
        let start = Timestamp::from_second(1_800_000_000).unwrap();
        let later = Timestamp::from_second(1_800_000_090).unwrap();
        let copying = in_phase(record(Phase::Copying), Phase::Copying, start);
        let still = in_phase(copying.clone(), Phase::Copying, later);
        assert_eq!(still.phase_since, Some(Time(start)));
        assert_eq!(view(&still, later).in_phase, Duration::from_secs(90));
        let cutting = in_phase(still, Phase::CuttingOver, later);
        assert_eq!(cutting.phase_since, Some(Time(later)));
    }

    #[test]
    fn the_switch_moves_the_serving_set_major_image_primary_and_system() {
        let mut status = PostgreSQLStatus {
            current_primary: Some("demo-0".into()),
            system_identifier: Some("7000000000000000001".into()),
            version: Some(15),
            image: Some("postgres:15".into()),
            upgrade: Some(record(Phase::CuttingOver)),
            ..PostgreSQLStatus::default()
        };
        let progress = Progress {
            record: Some(record(Phase::Retiring)),
            switched: Some(Switched {
                set: "demo-v17".into(),
                version: 17,
                image: "postgres:17".into(),
                primary: Some("demo-v17-0".into()),
                system_identifier: Some("7000000000000000017".into()),
            }),
            condition: Some((true, "Retiring", "serving on 17".into())),
            recheck: None,
        };
        let now = Time(Timestamp::from_second(1_800_000_000).unwrap());
        apply_to(&mut status, &progress, Some(3), &now);
        assert_eq!(status.instance_set.as_deref(), Some("demo-v17"));
        assert_eq!(status.current_primary.as_deref(), Some("demo-v17-0"));
        assert_eq!(
            (status.version, status.image.as_deref()),
            (Some(17), Some("postgres:17"))
        );
        assert_eq!(
            status.system_identifier.as_deref(),
            Some("7000000000000000017")
        );
        assert_eq!(status.upgrade.map(|u| u.phase), Some(Phase::Retiring));
        let upgrading = status.conditions.iter().find(|c| c.type_ == UPGRADING);
        assert_eq!(upgrading.map(|c| c.reason.as_str()), Some("Retiring"));
    }

    #[test]
    fn without_an_upgrade_the_status_is_left_as_it_was() {
        let mut status = PostgreSQLStatus {
            version: Some(15),
            ..PostgreSQLStatus::default()
        };
        let before = status.clone();
        let now = Time(Timestamp::from_second(1_800_000_000).unwrap());
        apply_to(&mut status, &Progress::default(), Some(3), &now);
        assert_eq!(status, before);
    }
}
