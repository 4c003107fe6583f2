//! Errors of the agent and the exit code each one maps to.

use backup_store::{CatalogError, LayoutError, StoreError};

use backup_store::wal::WalError;

/// Process exit codes, documented in `--help` and the README.
pub mod exit_code {
    pub const OK: i32 = 0;
    pub const OTHER: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const DATABASE: i32 = 3;
    pub const OBJECT_STORE: i32 = 4;
    pub const INTEGRITY: i32 = 5;
    pub const TARGET_NOT_EMPTY: i32 = 6;
    /// `verify-restore` ran and the backup failed one of its checks (the report names it).
    pub const VERIFICATION_FAILED: i32 = 7;
    /// `base-backup`: the archive never received the WAL the backup needs, so no manifest was
    /// written (the backup would not restore).
    pub const WAL_NOT_ARCHIVED: i32 = 8;
    /// `wal-fetch`: the archive has no such file (PostgreSQL's "not available").
    pub const NOT_ARCHIVED: i32 = 1;
    /// `wal-fetch`: any other failure. PostgreSQL stops recovery on an exit status above 125
    /// instead of taking it for the end of the archive and promoting at the wrong point.
    pub const RECOVERY_MUST_STOP: i32 = 126;
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("invalid arguments: {0}")]
    Usage(String),
    /// A path, namespace, cluster or backup id that cannot be part of a key.
    #[error("invalid arguments: {0}")]
    Layout(#[from] LayoutError),
    #[error("database: {0}")]
    Database(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("integrity check failed: {0}")]
    Integrity(String),
    /// A downloaded file whose size or sha256 differs from the manifest's: told apart from
    /// other integrity failures so a verification can name its checksum check.
    #[error("integrity check failed: {0}")]
    Checksum(String),
    #[error("restore target not empty: {0} (use --force to restore over it)")]
    TargetNotEmpty(String),
    #[error("{tool} failed ({status}): {stderr}")]
    Tool {
        tool: String,
        status: String,
        stderr: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A backup that is not there or whose manifest is unreadable.
    #[error(transparent)]
    Catalog(CatalogError),
    #[error("interrupted by signal")]
    Interrupted,
    /// A restore that failed after it had applied something: `state` says what the target holds.
    #[error("{source}; {state}")]
    Partial {
        source: Box<AgentError>,
        state: String,
    },
    #[error(transparent)]
    Wal(#[from] backup_store::wal::WalError),
    #[error("{0} is not in the archive")]
    NotArchived(String),
    #[error(
        "the archive still lacks WAL segment {segment} after {waited_seconds} s, so the base \
         backup would not restore: is WAL archiving on (spec.backup.walArchive) and working \
         (condition ContinuousArchiving)?"
    )]
    WalNotArchived {
        segment: String,
        waited_seconds: u64,
    },
    #[error(
        "PostgreSQL's pg_backup_stop still waits for the archive to take the backup's last WAL \
         after {waited_seconds} s, so the base backup would not restore: is WAL archiving \
         working (condition ContinuousArchiving)?"
    )]
    WalNotArchivedAtStop { waited_seconds: u64 },
    #[error("{0}")]
    Other(String),
}

impl AgentError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        AgentError::Io {
            context: context.into(),
            source,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            AgentError::Usage(_) | AgentError::Layout(_) => exit_code::USAGE,
            AgentError::Database(_) => exit_code::DATABASE,
            AgentError::Store(_) => exit_code::OBJECT_STORE,
            AgentError::Catalog(e) => match e {
                CatalogError::InvalidManifest { .. } => exit_code::INTEGRITY,
                CatalogError::Layout(_) => exit_code::USAGE,
                // Two writers of one id: a configuration problem (shared prefix), like an
                // existing backup id.
                CatalogError::IdTaken { .. }
                | CatalogError::WrongMethod { .. }
                | CatalogError::Unusable { .. } => exit_code::USAGE,
                CatalogError::Encode { .. } => exit_code::OTHER,
                CatalogError::Store(_) | CatalogError::BackupNotFound(_) => exit_code::OBJECT_STORE,
            },
            AgentError::Integrity(_) | AgentError::Checksum(_) => exit_code::INTEGRITY,
            AgentError::TargetNotEmpty(_) => exit_code::TARGET_NOT_EMPTY,
            AgentError::Partial { source, .. } => source.exit_code(),
            AgentError::Wal(e) => match e {
                WalError::Name(_) | WalError::Lsn(_) | WalError::SegmentSize(_) => exit_code::USAGE,
                WalError::Store(_) | WalError::Catalog(_) => exit_code::OBJECT_STORE,
                WalError::Conflict { .. } | WalError::Damaged { .. } => exit_code::INTEGRITY,
                WalError::SystemIdentifier { .. } | WalError::Io { .. } => exit_code::OTHER,
            },
            AgentError::NotArchived(_) => exit_code::NOT_ARCHIVED,
            AgentError::WalNotArchived { .. } | AgentError::WalNotArchivedAtStop { .. } => {
                exit_code::WAL_NOT_ARCHIVED
            }
            AgentError::Tool { .. }
            | AgentError::Io { .. }
            | AgentError::Interrupted
            | AgentError::Other(_) => exit_code::OTHER,
        }
    }
}

impl From<CatalogError> for AgentError {
    /// Store and layout failures keep the variant (and message) they have everywhere else.
    fn from(error: CatalogError) -> Self {
        match error {
            CatalogError::Store(e) => AgentError::Store(e),
            CatalogError::Layout(e) => AgentError::Layout(e),
            other => AgentError::Catalog(other),
        }
    }
}

pub type Result<T, E = AgentError> = std::result::Result<T, E>;
