//! `spec.backup.walArchive`: continuous WAL archiving into the backup destination, the base of
//! point-in-time recovery (issue 27, docs/src/design/pitr.md).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// `archive_timeout` when `timeoutSeconds` is unset: the most committed work lost when every
/// pod and volume is (RPO).
pub const DEFAULT_ARCHIVE_TIMEOUT_SECONDS: i32 = 5;

/// Continuous WAL archiving: the primary's instance manager uploads every WAL file PostgreSQL
/// completes, compressed, under the database system's identifier in the destination. Present
/// (even empty, `walArchive: {}`) means on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct WalArchivePolicy {
    /// A segment that holds any write is closed and archived after at most this many seconds
    /// (PostgreSQL's `archive_timeout`): the most committed work lost when every pod and
    /// volume is. An idle cluster uploads nothing. 5 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self >= 1 && self <= 3600").message("spec.backup.walArchive.timeoutSeconds must be between 1 and 3600"))]
    pub timeout_seconds: Option<i32>,
    /// When base backups run (CronJob `<name>-base`, from a replica when there is one); the
    /// cluster's `spec.backup.schedule` when unset, so the dump and the base backup run alike.
    /// A base backup is where every point-in-time restore starts: the newer it is, the less
    /// WAL a restore replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new(super::rules::schedule()).message("spec.backup.walArchive.baseBackupSchedule must be a Kubernetes CronJob schedule: five fields or a macro such as @daily"))]
    #[schemars(length(max = 128))]
    pub base_backup_schedule: Option<String>,
    /// The disk policy (docs/src/design/pitr.md §7): the fill of the data volume, in percent, from
    /// which WAL the bucket refuses is released unarchived, so that a bucket outage cannot stop
    /// the database by filling its volume. The archive then has a gap (an Event, the condition,
    /// an alert and a marker in the bucket say so) and a base backup follows when the bucket
    /// answers. 100: never; the database stops when the volume is full. 80 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self >= 50 && self <= 100").message("spec.backup.walArchive.gapAtVolumePercent must be between 50 and 100"))]
    pub gap_at_volume_percent: Option<i32>,
}

/// `gapAtVolumePercent` when unset.
pub const DEFAULT_GAP_AT_VOLUME_PERCENT: i32 = 80;

impl WalArchivePolicy {
    pub fn gap_at_volume_percent(&self) -> i32 {
        self.gap_at_volume_percent
            .unwrap_or(DEFAULT_GAP_AT_VOLUME_PERCENT)
    }

    pub fn timeout_seconds(&self) -> i32 {
        self.timeout_seconds
            .unwrap_or(DEFAULT_ARCHIVE_TIMEOUT_SECONDS)
    }
}
