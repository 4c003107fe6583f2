//! `GET /status` of an instance manager (port 8000): what the operator reads to choose whom to
//! promote and whether a switchover target has replayed enough.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The settings a hot standby may not run with lower values than its primary: such a standby
/// pauses recovery and never becomes ready. Lowering one therefore restarts the primary first
/// (docs/src/design/replication.md, "Rolling updates").
pub const HOT_STANDBY_SETTINGS: [&str; 5] = [
    "max_connections",
    "max_worker_processes",
    "max_wal_senders",
    "max_prepared_transactions",
    "max_locks_per_transaction",
];

/// The names of [`HOT_STANDBY_SETTINGS`] whose `next` value is below the `running` one; a name
/// missing from either side is not compared.
pub fn lowered(running: &BTreeMap<String, i64>, next: &BTreeMap<String, i64>) -> Vec<String> {
    HOT_STANDBY_SETTINGS
        .iter()
        .filter(
            |name| matches!((running.get(**name), next.get(**name)), (Some(r), Some(n)) if n < r),
        )
        .map(|name| (*name).to_owned())
        .collect()
}

/// The role an instance manager runs its PostgreSQL in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Primary,
    Replica,
    /// Stopped because it may not run as primary (the Lease is another's, or not renewed).
    Fenced,
    /// initdb, a clone or a rewind in progress.
    #[default]
    Initializing,
    Stopped,
    /// No usable data: the volume is empty (or holds another system's data) while the cluster
    /// has bootstrapped. Never initialised again; it waits to be failed over, then clones.
    Lost,
    /// A role a newer manager reports that this side does not know.
    #[serde(other)]
    Unknown,
}

/// Whether the postmaster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PostgresState {
    Running,
    #[default]
    Stopped,
}

impl Role {
    /// The role as `/status` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Replica => "replica",
            Self::Fenced => "fenced",
            Self::Initializing => "initializing",
            Self::Stopped => "stopped",
            Self::Lost => "lost",
            Self::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for PostgresState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Running => "running",
            Self::Stopped => "stopped",
        })
    }
}

/// WAL positions, in PostgreSQL's `X/Y` notation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lsns {
    /// A primary's current write position.
    pub current: Option<String>,
    /// A standby's last received (and flushed) position.
    pub received: Option<String>,
    /// A standby's last replayed position.
    pub replayed: Option<String>,
}

/// The `/status` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    pub pod: String,
    #[serde(default)]
    pub role: Role,
    #[serde(default)]
    pub postgres: PostgresState,
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub lease_holder: Option<String>,
    #[serde(default)]
    pub timeline: Option<u32>,
    #[serde(default)]
    pub system_identifier: Option<String>,
    /// What the server itself says (`pg_is_in_recovery()`), not what the manager asked for: a
    /// promotion still pending, or one nobody asked for, shows here.
    #[serde(default)]
    pub in_recovery: Option<bool>,
    #[serde(default)]
    pub lsn: Lsns,
    /// The WAL receiver's state (`streaming` while a replica follows its primary).
    #[serde(default)]
    pub wal_receiver: Option<String>,
    #[serde(default)]
    pub fenced: bool,
    /// The running server's values of [`HOT_STANDBY_SETTINGS`] (empty from a manager that
    /// does not report them, or while the server does not answer).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hot_standby_settings: BTreeMap<String, i64>,
    /// Why the last attempt at a point-in-time restore on this instance failed (it is retried
    /// with backoff); none once restored, or before a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_error: Option<String>,
    /// The WAL archiver's record since the manager started, while the cluster archives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveStatus>,
    /// On the primary: each declared role and database as the manager last left it (empty
    /// before the first pass, or when nothing is declared).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<crate::declared::ObjectState>,
    /// The digest (`declared::digest`) of the declaration those states are of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_digest: Option<String>,
}

/// What the manager's WAL archiver did since it started (times in Unix seconds). Only the
/// primary archives; a replica's archiver stays idle until a promotion.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveStatus {
    pub archived_count: u64,
    pub failed_count: u64,
    /// The last attempt failed (and none succeeded since).
    #[serde(default)]
    pub failing: bool,
    /// WAL files PostgreSQL has ready (`.ready`) and the archive does not hold yet: the lag.
    #[serde(default)]
    pub pending: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_wal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_wal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_at: Option<i64>,
    /// Why the last failure failed (the store's error; never a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The file whose bytes differ from those already stored under its name (two servers
    /// wrote one timeline: a split brain), while archiving is stopped behind it. It is never
    /// overwritten nor released unarchived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    /// Files acknowledged to PostgreSQL unarchived since the manager started (the disk
    /// policy, docs/src/design/pitr.md §7).
    #[serde(default)]
    pub gave_way_count: u64,
    /// How full the data volume is, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_used_percent: Option<u8>,
    /// The fill from which the archive gives way (100: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_at_percent: Option<u8>,
    /// The gap open now, else the last one this manager closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<ArchiveGap>,
    /// The last continuity check of the archive (docs/src/design/pitr.md §6); none before the
    /// first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuity: Option<ArchiveContinuity>,
}

/// Whether the archive holds every file a restore from the oldest base backup to the newest
/// archived segment needs: each segment of each timeline on the way, each timeline's history
/// file, nothing of another database system.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveContinuity {
    /// Unix seconds.
    pub checked_at: i64,
    pub system_identifier: String,
    /// The span checked: the oldest base backup's first segment to the newest archived one
    /// (none: no base backup of this system yet, nothing to check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_segment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_segment: Option<String>,
    /// The system's base backups in the bucket; the span starts at the oldest on the newest
    /// timeline's history.
    #[serde(default)]
    pub base_backups: u64,
    /// The timelines the span crosses, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timelines: Vec<u32>,
    /// Segments of the span found in the archive.
    pub segments: u64,
    /// Segments of the span still waiting on the primary to be archived (not a gap).
    #[serde(default)]
    pub pending: u64,
    /// Segments of the span absent with no explanation: the first few, and how many.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    #[serde(default)]
    pub missing_count: u64,
    /// Segments of the span absent because the disk policy released them (a gap marker names
    /// them): known, but a restore cannot cross them either.
    #[serde(default)]
    pub released_count: u64,
    /// Timelines whose history file the archive lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_history: Vec<u32>,
    /// Segments that were missing and that this check uploaded from the primary's own
    /// `pg_wal` (a promoted standby received them from a primary that died before archiving
    /// them): the first few, and how many.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub healed: Vec<String>,
    #[serde(default)]
    pub healed_count: u64,
    /// Archived files whose first page names another system, segment size or place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign: Vec<String>,
    /// Why the check could not run (the bucket's error); the other fields are then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ArchiveContinuity {
    /// Files a restore across the span needs and cannot have: missing or released segments,
    /// missing history files, and files of another system.
    pub fn breaks(&self) -> u64 {
        self.unexplained() + self.released_count
    }

    /// [`Self::breaks`] but the segments the disk policy released, which its own gap record
    /// and alert already explain.
    pub fn unexplained(&self) -> u64 {
        self.missing_count + self.missing_history.len() as u64 + self.foreign.len() as u64
    }
}

/// WAL released to PostgreSQL unarchived because the volume filled while the bucket failed:
/// no point-in-time restore can cross it. The same record is the gap marker in the bucket
/// (`wal/<system>/gaps/<first>-<last>.json`), for restores and the continuity check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveGap {
    pub system_identifier: String,
    /// The first and last segments released (none: only other files were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_segment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_segment: Option<String>,
    /// History, partial and backup-history files released.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_files: Vec<String>,
    pub files: u64,
    /// Unix seconds.
    pub opened_at: i64,
    /// When an upload succeeded again; none while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<i64>,
    /// The fill when the gap opened.
    pub volume_used_percent: u8,
    /// The store's error that opened it (never a credential).
    pub reason: String,
}

impl InstanceStatus {
    /// A running standby: the only kind of instance that can be promoted. A server the manager
    /// reports as a replica but that left recovery (a promotion it did not ask for) is not one.
    pub fn is_running_replica(&self) -> bool {
        self.role == Role::Replica
            && self.postgres == PostgresState::Running
            && self.in_recovery != Some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn only_a_setting_set_lower_is_lowered() {
        let running = values(&[("max_connections", 200), ("max_wal_senders", 10)]);
        let next = values(&[
            ("max_connections", 100),
            ("max_wal_senders", 20),
            ("max_worker_processes", 4),
        ]);
        assert_eq!(lowered(&running, &next), ["max_connections"]);
        assert!(lowered(&running, &running).is_empty());
        assert!(lowered(&BTreeMap::new(), &next).is_empty(), "not reported");
    }
}
