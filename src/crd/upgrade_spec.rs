//! `spec.upgrade`: how a major-version upgrade (an increase of `spec.version`) is carried out
//! (docs/src/cluster/upgrades.md).

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How `spec.version` increases are carried out.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeSpec {
    /// `online` (the default): a new set of instances on the new major, filled by logical
    /// replication while the old one serves, then a cut-over of seconds. `inPlace`: every
    /// instance stopped, `pg_upgrade --link` on the primary's volume, the replicas cloned
    /// again: no second set of volumes, and the database down for the whole upgrade.
    #[serde(default)]
    pub method: UpgradeMethod,
    /// How long the old instances are kept after the cut-over, stopped, with their volumes: a
    /// way back by hand. 600 when unset; 0 deletes them at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 0").message("spec.upgrade.keepOldForSeconds cannot be negative"))]
    pub keep_old_for_seconds: Option<i64>,
}

/// How a major-version upgrade is carried out.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum UpgradeMethod {
    /// Logical replication into a new set of instances; the old one serves until the cut-over.
    #[default]
    Online,
    /// `pg_upgrade --link` of the stopped primary's volume; the replicas cloned again.
    InPlace,
}

/// `keepOldForSeconds` when unset.
pub const DEFAULT_KEEP_OLD_FOR_SECONDS: i64 = 600;

impl UpgradeSpec {
    /// The method of `spec` (online when unset).
    pub fn method(spec: Option<&Self>) -> UpgradeMethod {
        spec.map(|s| s.method).unwrap_or_default()
    }

    /// How long the old set is kept after the switch.
    pub fn keep_old_for(spec: Option<&Self>) -> std::time::Duration {
        let seconds = spec
            .and_then(|s| s.keep_old_for_seconds)
            .unwrap_or(DEFAULT_KEEP_OLD_FOR_SECONDS);
        std::time::Duration::from_secs(u64::try_from(seconds).unwrap_or_default())
    }
}
