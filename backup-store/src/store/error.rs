//! What went wrong talking to a bucket. Every variant keeps its cause as the error `source`;
//! the message also spells the cause out, since Events and the agent's summary show only the
//! outer message.

use std::error::Error;
use std::fmt::Write;

/// Any cause: an SDK or HTTP error, or a plain message (`"...".into()`).
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "object store {location}: credentials rejected or missing: {}",
        describe(source)
    )]
    Credentials {
        location: String,
        #[source]
        source: BoxError,
    },
    #[error("object store {location}: bucket does not exist: {}", describe(source))]
    NoSuchBucket {
        location: String,
        #[source]
        source: BoxError,
    },
    #[error("object store {location}: object {key} not found")]
    NotFound { location: String, key: String },
    /// A create-only write ([`super::ObjectStore::put_if_absent`]) found the key taken.
    #[error("object store {location}: object {key} already exists")]
    AlreadyExists { location: String, key: String },
    #[error("object store {location}: {operation} failed: {}", describe(source))]
    Other {
        location: String,
        /// What was attempted, with the key, e.g. `PutObject ns/db/b1/manifest.json`.
        operation: String,
        #[source]
        source: BoxError,
    },
    #[error("object store configuration: {}", describe(.0))]
    Config(#[source] BoxError),
    /// The server accepted the call but did not finish it in time (a stalled or hostile
    /// endpoint); the caller's deadline, not the server, ended it.
    #[error("object store {location}: {operation} did not finish within {}s", after.as_secs_f64())]
    TimedOut {
        location: String,
        operation: String,
        after: std::time::Duration,
    },
    /// An answer larger than the caller accepts (an endless manifest or listing).
    #[error("object store {location}: {operation} exceeds {limit}")]
    TooLarge {
        location: String,
        operation: String,
        /// e.g. `100000 objects`.
        limit: String,
    },
}

impl StoreError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound { .. })
    }

    pub fn is_already_exists(&self) -> bool {
        matches!(self, StoreError::AlreadyExists { .. })
    }

    /// A configuration problem described by `context`, caused by `source`.
    pub fn config(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Config(Box::new(Context {
            context: context.into(),
            source: source.into(),
        }))
    }
}

/// How a store refused a request. Each backend decides this from its own codes and statuses;
/// the [`StoreError`] is then built the same way for both.
pub(crate) enum Refusal {
    Credentials,
    NoSuchBucket,
    NotFound,
    /// A precondition (`If-None-Match: *`, `ifGenerationMatch=0`) failed: the key exists.
    AlreadyExists,
    Other,
}

impl Refusal {
    /// The error for `operation` on `key` at `location`, caused by `source`.
    pub(crate) fn error(
        self,
        location: &str,
        operation: &str,
        key: &str,
        source: impl Into<BoxError>,
    ) -> StoreError {
        let location = location.to_string();
        let key = key.to_string();
        let source: BoxError = source.into();
        match self {
            Refusal::Credentials => StoreError::Credentials { location, source },
            Refusal::NoSuchBucket => StoreError::NoSuchBucket { location, source },
            // The key says it all; the HTTP details of a 404 add nothing.
            Refusal::NotFound => StoreError::NotFound { location, key },
            Refusal::AlreadyExists => StoreError::AlreadyExists { location, key },
            Refusal::Other => StoreError::Other {
                location,
                operation: format!("{operation} {key}"),
                source,
            },
        }
    }
}

/// Adds what was being done to a cause, e.g. "reading key file /x" to an I/O error.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct Context {
    pub context: String,
    #[source]
    pub source: BoxError,
}

impl Context {
    pub fn boxed(context: impl Into<String>, source: impl Into<BoxError>) -> BoxError {
        Box::new(Context {
            context: context.into(),
            source: source.into(),
        })
    }
}

/// The HTTP status and (start of the) body of a refused request, for stores spoken to over
/// plain HTTP (GCS).
#[derive(Debug, thiserror::Error)]
#[error("HTTP {status}: {body}")]
pub struct HttpStatus {
    /// e.g. `403 Forbidden`.
    pub status: String,
    pub body: String,
}

fn describe(error: &BoxError) -> String {
    chain(&**error)
}

/// `error: cause: cause's cause`, like the SDKs' own error reports. Libraries differ on
/// whether a message already includes its source's, so a cause already spelled out is skipped.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !out.contains(&text) {
            let _ = write!(out, ": {text}");
        }
        next = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_spell_out_the_cause_once() {
        let io = std::io::Error::other("disk on fire");
        let err = StoreError::Other {
            location: "s3://b".into(),
            operation: "GetObject k".into(),
            source: Context::boxed("reading the body", io),
        };
        assert_eq!(
            err.to_string(),
            "object store s3://b: GetObject k failed: reading the body: disk on fire"
        );
        assert!(err.source().is_some());
        // A cause that already prints its own source is not repeated.
        #[derive(Debug, thiserror::Error)]
        #[error("request failed: {0}")]
        struct Verbose(#[source] std::io::Error);
        let err = StoreError::Config(Box::new(Verbose(std::io::Error::other("refused"))));
        assert_eq!(
            err.to_string(),
            "object store configuration: request failed: refused"
        );
    }
}
