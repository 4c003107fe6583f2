//! `status.upgrade`: a major-version upgrade in progress, as the operator records it so that a
//! restart resumes it (docs/src/design/major-upgrades.md).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::UpgradeMethod;

/// A major-version upgrade in progress.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStatus {
    /// The major serving when the upgrade started.
    pub from: i32,
    /// The major `spec.version` asked for.
    pub to: i32,
    pub phase: UpgradePhase,
    /// When the upgrade entered its phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<Time>,
    /// The set serving when the upgrade started: retired after the switch.
    pub from_set: String,
    /// The new set of instances (`<name>-v<to>`).
    pub new_set: String,
    /// The image the old set runs: the spec names the new one from the upgrade's start.
    pub from_image: String,
    /// The old primary the copy reads from: a failover of the old set ends the copy (its
    /// logical slots do not survive one before PostgreSQL 17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_from: Option<String>,
    /// `inPlace` or `online` (absent: online, the only method of older records).
    #[serde(default, skip_serializing_if = "is_online")]
    pub method: UpgradeMethod,
    /// In place: the primary whose volume `pg_upgrade` upgrades.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The old primary's final WAL position, once frozen for the cut-over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen_lsn: Option<String>,
    /// What the upgrade waits for, or why it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where an upgrade is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum UpgradePhase {
    /// Asking the old primary what logical replication cannot carry.
    Preflight,
    /// The new set is created and its primary is coming up.
    Provisioning,
    /// Published, copying, then following the old primary.
    Copying,
    /// The old primary frozen at `frozenLsn`: the write gap.
    CuttingOver,
    /// The new set serves; the old one is kept for `spec.upgrade.keepOldFor`, then deleted.
    Retiring,
    /// Undoing an upgrade before its switch.
    Cancelling,
    /// In place: every instance of the set stopping (a clean shutdown).
    Stopping,
    /// In place: the Job running `pg_upgrade --link` on the primary's volume.
    Linking,
    /// In place: upgraded; the set starts on the new major, its replicas cloned again.
    Starting,
}

impl UpgradeStatus {
    /// The new set while it is wanted beside the serving one (from its provisioning until the
    /// switch; a cancel deletes it): its StatefulSet is applied, its pods need the server
    /// certificate's names and their Lease.
    pub fn incoming_set(&self) -> Option<&str> {
        use UpgradePhase::*;
        matches!(self.phase, Provisioning | Copying | CuttingOver).then_some(self.new_set.as_str())
    }

    /// Whether the serving set is still the old one (the switch has not happened): it keeps
    /// [`Self::from_image`].
    pub fn before_switch(&self) -> bool {
        !matches!(self.phase, UpgradePhase::Retiring | UpgradePhase::Starting)
    }

    /// In place, while the set must not run: stopping, or its primary's volume being upgraded.
    /// Nothing fails it over meanwhile.
    pub fn set_stopped(&self) -> bool {
        matches!(self.phase, UpgradePhase::Stopping | UpgradePhase::Linking)
    }

    /// In place, from the stop until the upgraded primary serves: the HA step leaves the set
    /// alone (no failover to a replica that holds the old major, or nothing).
    pub fn holds_ha(&self) -> bool {
        self.method == UpgradeMethod::InPlace
            && matches!(
                self.phase,
                UpgradePhase::Stopping | UpgradePhase::Linking | UpgradePhase::Starting
            )
    }
}

fn is_online(method: &UpgradeMethod) -> bool {
    *method == UpgradeMethod::Online
}
