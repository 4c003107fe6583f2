//! The operator's errors: each names the object and the step that failed.

use crate::resources::IncompleteObject;

/// A failed reconcile step. The message never contains a secret value.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    IncompleteObject(#[from] IncompleteObject),

    #[error("the caches of child objects did not finish their first list within {0:?}")]
    CachesNotSynced(std::time::Duration),

    #[error("reading {kind} {name} failed: {}", describe(source))]
    Read {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("applying {kind} {name} failed: {}", describe(source))]
    Apply {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("deleting {kind} {name} failed: {}", describe(source))]
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

    #[error("updating the status of {name} failed: {}", describe(source))]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("the backup bucket of {name}: {source}")]
    Bucket {
        name: String,
        #[source]
        source: crate::runtime::buckets::BucketError,
    },

    #[error(transparent)]
    Tls(#[from] crate::resources::tls::TlsError),

    /// A spec that names a Secret Tusk generated (issue 47): refused before anything is read.
    #[error(transparent)]
    BorrowedSecret(#[from] crate::resources::BorrowedSecret),

    /// A major-version upgrade's request to an instance manager failed or went unanswered.
    #[error("major-version upgrade: {step} on {pod}: {reason}")]
    Upgrade {
        step: &'static str,
        pod: String,
        reason: String,
    },

    #[error("{0}")]
    Invariant(String),
}

impl Error {
    /// The namespace is being deleted: the API server refuses new objects in it, and everything
    /// in it, the cluster included, is about to go. Nothing to report or retry.
    pub fn is_namespace_terminating(&self) -> bool {
        let source = match self {
            Self::Apply { source, .. }
            | Self::Delete { source, .. }
            | Self::Status { source, .. } => source,
            _ => return false,
        };
        matches!(source, kube::Error::Api(status)
            if status.code == 403 && status.message.contains("because it is being terminated"))
    }

    /// A status write refused because the object changed since the copy it was computed from
    /// was read (see `runtime::status::write`): not a failure, the next reconcile starts from
    /// the newer copy.
    pub fn is_stale_copy(&self) -> bool {
        matches!(self, Self::Status { source: kube::Error::Api(status), .. } if status.code == 409)
    }

    /// A PascalCase category for Events, conditions and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::IncompleteObject(_) => "IncompleteObject",
            Self::CachesNotSynced(_) => "CachesNotSynced",
            Self::Read { .. } => "ReadFailed",
            Self::Apply { .. } => "ApplyFailed",
            Self::Delete { .. } => "DeleteFailed",
            Self::Serialize { .. } => "SerializeFailed",
            Self::Status { .. } => "StatusUpdateFailed",
            Self::Bucket { .. } => "StoreUnreachable",
            Self::Tls(crate::resources::tls::TlsError::Brought { .. }) => {
                "ServerCertificateInvalid"
            }
            Self::Tls(crate::resources::tls::TlsError::ForeignCa { .. }) => "SecretNotAllowed",
            Self::Tls(_) => "CertificateFailed",
            Self::BorrowedSecret(_) => "SecretNotAllowed",
            Self::Upgrade { .. } => "UpgradeStepFailed",
            Self::Invariant(_) => "InternalError",
        }
    }
}

/// The API server's own message for API errors (without the debug dump of its Status), the
/// error's display otherwise.
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.reason),
        other => other.to_string(),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// An apply of `kind`/`name` refused by the API server with 403 and `message`.
    fn forbidden_apply(kind: &str, name: &str, message: &str) -> Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden", "message": message,
        }))
        .unwrap();
        Error::Apply {
            kind: kind.to_owned(),
            name: name.to_owned(),
            source: kube::Error::Api(Box::new(status)),
        }
    }

    #[test]
    fn api_errors_show_the_servers_message_only() {
        let error = forbidden_apply(
            "ConfigMap",
            "demo-config",
            "configmaps \"demo-config\" is forbidden",
        );
        assert_eq!(
            error.to_string(),
            "applying ConfigMap demo-config failed: configmaps \"demo-config\" is forbidden (Forbidden)"
        );
        assert_eq!(error.reason(), "ApplyFailed");
        assert!(!error.is_namespace_terminating());
    }

    #[test]
    fn writes_refused_in_a_terminating_namespace_are_recognised() {
        let error = forbidden_apply(
            "Secret",
            "demo-app",
            "secrets \"demo-app\" is forbidden: unable to create new content in namespace prod because it is being terminated",
        );
        assert!(error.is_namespace_terminating());
    }

    #[test]
    fn only_a_conflicting_status_write_is_a_stale_copy() {
        let refused = |code: u16| {
            let status: kube::core::Status = serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": code, "reason": "Conflict",
                "message": "the object has been modified",
            }))
            .unwrap();
            kube::Error::Api(Box::new(status))
        };
        let status = |code| Error::Status {
            name: "demo".into(),
            source: refused(code),
        };
        assert!(status(409).is_stale_copy());
        assert!(!status(422).is_stale_copy());
        let apply = Error::Apply {
            kind: "Lease".into(),
            name: "demo-primary".into(),
            source: refused(409),
        };
        assert!(
            !apply.is_stale_copy(),
            "only the status write is retried quietly"
        );
    }
}
