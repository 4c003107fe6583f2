//! The observed state of a `PostgreSQL`: what the operator writes to its status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Observed state, written only by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostgreSQLStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// A one-word summary; use the conditions for decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Desired number of instances.
    #[serde(default)]
    pub instances: i32,
    /// Instances whose readiness probe passes.
    #[serde(default)]
    pub ready_instances: i32,
    /// The pod that holds the primary Lease: the only instance that accepts writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_primary: Option<String>,
    /// The set of instances that serves: the StatefulSet whose pods are `<set>-<ordinal>` and
    /// whose Lease is `<set>-primary`. Absent: the cluster's name. A major-version upgrade
    /// brings up another set beside it and hands over to it at the cut-over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_set: Option<String>,
    /// The PostgreSQL major the serving set runs: `spec.version` above it starts a
    /// major-version upgrade, which moves it at the switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i32>,
    /// The image the serving set runs: an upgrade's old set keeps it until the switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A major-version upgrade in progress; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<super::UpgradeStatus>,
    /// The instance a switchover in progress hands the Lease to (requested with the
    /// `tusk.dev/switchover-to` annotation); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_primary: Option<String>,
    /// Every instance as its pod and instance manager last reported it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["pod"]))]
    pub instance_states: Vec<InstanceState>,
    /// The newest failover or switchover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failover: Option<Failover>,
    /// `host:port` of the read-write Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Names of the credential Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<SecretNames>,
    /// The certificates Tusk issued for the cluster (absent with `spec.tls.serverSecret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificates: Option<CertificateTimes>,
    /// Standard conditions: Ready, Restored (clusters with spec.restore), BackupScheduled,
    /// LastBackupSucceeded and Cleanup (while a deletion waits for the bucket).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The newest Completed backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_backup: Option<SuccessfulBackup>,
    /// What spec.restore restored into this cluster; set once, so a restore runs only once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<RestoredFrom>,
    /// The newest Backup whose verification passed (with `spec.backup.verify` or on request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verified_backup: Option<super::VerifiedBackup>,
    /// The database system identifier, as the first primary recorded it on the Lease: the
    /// cluster has bootstrapped. Never cleared (a major-version upgrade's switch replaces it
    /// with the new set's); an instance with other data never serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_identifier: Option<String>,
    /// What a point-in-time restore of this cluster can reach (with `spec.backup.walArchive`
    /// and a Completed base backup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_window: Option<RecoveryWindow>,
    /// Each role and database of `spec.roles` and `spec.databases` (and each role Tusk made that
    /// is no longer declared) as the primary's manager last kept it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<DeclaredObject>,
}

/// A declared role or database, as the primary's manager last kept it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeclaredObject {
    /// `role` or `database`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// `Ready` (as declared), `Absent` (dropped, or never there), `Disabled` (a role Tusk made
    /// that is no longer declared: no login, no password), `Pending` (not kept yet) or
    /// `Failed`.
    pub state: String,
    /// Why it failed, in PostgreSQL's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl PostgreSQLStatus {
    /// See [`super::PostgreSQL::has_served`]: its database exists (the system identifier is
    /// recorded), it is Ready now, or Degraded (Ready before).
    pub fn has_served(&self) -> bool {
        self.system_identifier.is_some()
            || matches!(self.phase, Some(Phase::Ready | Phase::Degraded))
            || self
                .conditions
                .iter()
                .any(|c| c.type_ == super::conditions::READY && c.status == "True")
    }
}

/// One instance: its pod, the role label the operator gave it, its readiness.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceState {
    /// The pod's name.
    pub pod: String,
    /// `primary` or `replica` (the pod's role label), empty while unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    /// The pod's readiness.
    pub ready: bool,
}

/// A change of primary.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Failover {
    /// The former primary.
    pub from: String,
    /// The promoted instance.
    pub to: String,
    /// Why: `PrimaryLost` (its Lease expired) or `Switchover` (requested).
    pub reason: String,
    /// When the operator handed the Lease to the new primary.
    pub at: Time,
    /// Seconds from noticing the lost primary (from asking the old primary, for a switchover)
    /// to handing over the Lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// The backup a cluster was restored from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoredFrom {
    /// Id of the restored backup (`latest` resolved by the restore Job is reported as `latest`).
    pub backup_id: String,
    /// Prefix the backup was read from, e.g. `s3://bucket/path/<namespace>/<cluster>/`.
    pub location: String,
    /// When the restore Job finished.
    pub restored_at: Time,
}

/// One-word summary of a cluster.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// Children are being created or the server is starting.
    Provisioning,
    /// Every instance is ready.
    Ready,
    /// Was ready, and is not Ready now: an instance is not ready or a step failed (see the
    /// Ready condition).
    Degraded,
    /// The spec cannot be realised; see the Ready condition's message.
    Failed,
}

/// Names of the Secrets holding credentials.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretNames {
    /// Secret with the application role's credentials.
    pub app: String,
    /// Secret with the superuser's credentials.
    pub superuser: String,
}

/// When the cluster's certificates next change, without anyone asking.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateTimes {
    /// When the server certificate (and the replication role's) expires; it is issued again
    /// once a third of its life is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_not_after: Option<Time>,
    /// When the cluster CA's next rotation step is due: publishing a new CA beside it, its
    /// promotion, or the old one's retirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_next_step: Option<Time>,
}

/// The stretch of time a point-in-time restore can target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryWindow {
    /// The earliest time a restore can target: when the oldest Completed base backup completed.
    pub first: Time,
    /// When the newest WAL file was archived, as the primary's manager last reported: commits
    /// up to about then can be restored. Absent until it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_at: Option<Time>,
    /// The oldest Completed base backup (a Backup with `method: physical`).
    pub oldest_base_backup: String,
    /// How many Completed base backups the window rests on.
    pub base_backups: i32,
    /// When the primary began releasing WAL unarchived (a gap: its volume was full while the
    /// bucket failed), while no base backup has completed after the gap closed: restores reach
    /// up to about here, not `lastArchivedAt`. Absent once one has, and the window then starts
    /// from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_at: Option<Time>,
}

/// A reference to a Completed Backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessfulBackup {
    /// Name of the Backup.
    pub name: String,
    /// When it completed.
    pub completed_at: Time,
}
