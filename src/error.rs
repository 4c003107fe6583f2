//! The operator's errors: each names the object and the step that failed.

use crate::resources::IncompleteObject;

/// A failed reconcile step. The message never contains a secret value.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    IncompleteObject(#[from] IncompleteObject),

    #[error("reading {kind} {name} failed: {source}")]
    Read {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("applying {kind} {name} failed: {source}")]
    Apply {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("deleting {kind} {name} failed: {source}")]
    Delete {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("serializing {kind} {name} failed: {source}")]
    Serialize {
        kind: String,
        name: String,
        #[source]
        source: serde_json::Error,
    },

    #[error("updating the status of {name} failed: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A PascalCase category for Events, conditions and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::IncompleteObject(_) => "IncompleteObject",
            Self::Read { .. } => "ReadFailed",
            Self::Apply { .. } => "ApplyFailed",
            Self::Delete { .. } => "DeleteFailed",
            Self::Serialize { .. } => "SerializeFailed",
            Self::Status { .. } => "StatusUpdateFailed",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
