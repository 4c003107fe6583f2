//! What can go wrong in a command, each with the object or file it concerns.

/// An error of a `kubectl tusk` command; `main` prints it and exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no client for the cluster (KUBECONFIG or in-cluster config): {0}")]
    Client(#[source] kube::Error),
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("Backup {name} failed: {message}")]
    BackupFailed { name: String, message: String },
    #[error("Backup {name} did not finish within {seconds}s (last phase: {phase})")]
    BackupTimeout {
        name: String,
        seconds: u64,
        phase: String,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {message}")]
    Encode { what: String, message: String },
}

impl Error {
    /// Wraps a client error with what was being done.
    pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Kube { what, source }
    }

    /// Wraps an I/O error with the file or process it concerns.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }

    /// Wraps a serialisation error with what was being written.
    pub fn encode<E: std::fmt::Display>(what: impl Into<String>) -> impl FnOnce(E) -> Self {
        let what = what.into();
        move |e| Self::Encode {
            what,
            message: e.to_string(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
