//! Where the manager learns the declaration: Secret `<cluster>-declared`, listed and then
//! watched by name through the API (its Role may read that one Secret and no other), or a file
//! standing in for it in tests. `None`: nothing declared, nothing is touched.

use std::path::PathBuf;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tokio::sync::watch;
use tusk_contract::declared::{DOCUMENT_KEY, Document};

/// After an error from the API server, before the next list.
const RETRY: Duration = Duration::from_secs(2);
/// How often the test file is read.
const FILE_POLL: Duration = Duration::from_millis(500);

pub enum Source {
    Secret { api: Box<Api<Secret>>, name: String },
    File(PathBuf),
}

/// Starts following `source`; the receiver holds the latest declaration.
pub fn spawn(source: Source) -> watch::Receiver<Option<Document>> {
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(async move {
        match source {
            Source::Secret { api, name } => follow_secret(&api, &name, &sender).await,
            Source::File(path) => follow_file(&path, &sender).await,
        }
    });
    receiver
}

async fn follow_secret(api: &Api<Secret>, name: &str, sender: &watch::Sender<Option<Document>>) {
    let by_name = format!("metadata.name={name}");
    loop {
        if let Err(e) = list_and_watch(api, &by_name, sender).await {
            tracing::warn!(secret = name, error = %e, "following the declared roles and databases");
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// One list, then its watch until the API server ends it (a timeout, a compaction).
async fn list_and_watch(
    api: &Api<Secret>,
    by_name: &str,
    sender: &watch::Sender<Option<Document>>,
) -> Result<(), kube::Error> {
    let list = api.list(&ListParams::default().fields(by_name)).await?;
    publish(sender, list.items.first());
    let version = list.metadata.resource_version.unwrap_or_default();
    let params = WatchParams::default().fields(by_name).timeout(290);
    let mut events = api.watch(&params, &version).await?.boxed();
    while let Some(event) = events.try_next().await? {
        match event {
            WatchEvent::Added(secret) | WatchEvent::Modified(secret) => {
                publish(sender, Some(&secret));
            }
            WatchEvent::Deleted(_) => publish(sender, None),
            WatchEvent::Bookmark(_) => {}
            // An expired version: list again.
            WatchEvent::Error(_) => return Ok(()),
        }
    }
    Ok(())
}

fn publish(sender: &watch::Sender<Option<Document>>, secret: Option<&Secret>) {
    let document = match secret {
        None => None,
        Some(secret) => {
            let bytes = secret.data.as_ref().and_then(|d| d.get(DOCUMENT_KEY));
            match bytes.map(|b| serde_json::from_slice::<Document>(&b.0)) {
                Some(Ok(document)) => Some(document),
                // Kept as it was: a document this manager cannot read changes nothing.
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "the declared roles and databases do not parse");
                    return;
                }
                None => None,
            }
        }
    };
    sender.send_if_modified(|current| {
        let changed = *current != document;
        *current = document;
        changed
    });
}

async fn follow_file(path: &PathBuf, sender: &watch::Sender<Option<Document>>) {
    loop {
        let document = match std::fs::read(path) {
            Ok(bytes) => match serde_json::from_slice::<Document>(&bytes) {
                Ok(document) => Some(Some(document)),
                Err(e) => {
                    tracing::warn!(error = %e, "the declared roles and databases do not parse");
                    None
                }
            },
            Err(_) => Some(None),
        };
        if let Some(document) = document {
            sender.send_if_modified(|current| {
                let changed = *current != document;
                *current = document;
                changed
            });
        }
        tokio::time::sleep(FILE_POLL).await;
    }
}
