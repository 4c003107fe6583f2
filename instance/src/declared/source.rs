//! Secrets the manager follows through the API rather than as mounted files (a change reaches
//! it in about a second, not at the kubelet's next refresh, a minute or more): Secret
//! `<cluster>-declared` (the declared roles and databases) and `<cluster>-verifiers` (the
//! superuser's and the app owner's password verifiers). Each is listed and then watched by name;
//! the pod's Role may read those two Secrets and no other. In tests a file stands in for the
//! declaration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::follow::publish;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use tokio::sync::watch;
use tusk_contract::declared::{DOCUMENT_KEY, Document};

/// A Secret's data as last seen; `None`: the Secret does not exist (or was not seen yet).
pub type SecretData = Option<BTreeMap<String, ByteString>>;

/// How often the test file is read.
const FILE_POLL: Duration = Duration::from_millis(500);

/// Where the declaration comes from.
pub enum Source {
    /// Secret `<cluster>-declared`, as [`follow`] sees it.
    Secret(watch::Receiver<SecretData>),
    File(PathBuf),
}

/// Follows Secret `name` through `api`; the receiver holds its data as last seen.
pub fn follow(api: Api<Secret>, name: String) -> watch::Receiver<SecretData> {
    crate::follow::named(api, name, |secret| {
        secret.map(|s| s.data.unwrap_or_default())
    })
}

/// Starts following the declaration; the receiver holds the latest one (`None`: nothing is
/// declared, and nothing is touched).
pub fn spawn(source: Source) -> watch::Receiver<Option<Document>> {
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(async move {
        match source {
            Source::Secret(mut data) => loop {
                let document = {
                    let data = data.borrow_and_update();
                    data.as_ref()
                        .map(|d| d.get(DOCUMENT_KEY).map(|b| parse(&b.0)))
                };
                match document {
                    None | Some(None) => publish(&sender, None),
                    Some(Some(Some(document))) => publish(&sender, Some(document)),
                    // Kept as it was: a document this manager cannot read changes nothing.
                    Some(Some(None)) => {}
                }
                if data.changed().await.is_err() {
                    return;
                }
            },
            Source::File(path) => loop {
                match std::fs::read(&path) {
                    Ok(bytes) => {
                        if let Some(document) = parse(&bytes) {
                            publish(&sender, Some(document));
                        }
                    }
                    Err(_) => publish(&sender, None),
                }
                tokio::time::sleep(FILE_POLL).await;
            },
        }
    });
    receiver
}

fn parse(bytes: &[u8]) -> Option<Document> {
    serde_json::from_slice(bytes)
        .inspect_err(
            |e| tracing::warn!(error = %e, "the declared roles and databases do not parse"),
        )
        .ok()
}
