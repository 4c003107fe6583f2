//! The manager's errors, each naming what it was doing. None of them carries a password: tool
//! output is stderr of tools given passwords only through a passfile.

use std::process::ExitStatus;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{tool} failed ({status}): {stderr}")]
    Tool {
        tool: String,
        status: ExitStatus,
        stderr: String,
    },
    #[error("{what}: {source}")]
    Sql {
        what: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("Lease {name}: {source}")]
    Kube {
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(transparent)]
    Tls(#[from] tusk_pgtls::TlsError),
    #[error("configuration: {0}")]
    Config(String),
    #[error("{0}")]
    State(String),
    /// Not a failure: the step waits on another instance (a new primary's first checkpoint,
    /// say) and is tried again soon, without the backoff of a failure.
    #[error("{0}")]
    NotYet(String),
}

impl Error {
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }

    pub fn sql(what: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> Error {
        let what = what.into();
        move |source| Error::Sql { what, source }
    }
}
