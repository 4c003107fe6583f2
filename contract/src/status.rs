//! `GET /status` of an instance manager (port 8000): what the operator reads to choose whom to
//! promote and whether a switchover target has replayed enough.

use serde::{Deserialize, Serialize};

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
