//! Objects the manager follows through the API rather than by polling: listed, then watched,
//! by name (what a Role limited to that name allows), so a change reaches it within the API
//! server's own latency. Used for the declared Secrets, the Lease a pooler routes by, and the
//! wake-up of the role source when the Lease changes hands.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tokio::sync::watch;

/// After an error from the API server, before the next list.
const RETRY: Duration = Duration::from_secs(2);

/// Follows object `name` of `api` (listed, then watched, by name: what a Role limited to that
/// name allows); the receiver holds `view` of it as last seen (of `None` once it is gone).
pub fn named<K, T>(api: Api<K>, name: String, view: fn(Option<K>) -> T) -> watch::Receiver<T>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: Default + PartialEq + Send + Sync + 'static,
{
    let (sender, receiver) = watch::channel(T::default());
    tokio::spawn(async move {
        let by_name = format!("metadata.name={name}");
        loop {
            if let Err(e) = list_and_watch(&api, &by_name, &sender, view).await {
                tracing::warn!(object = name, error = %e, "following an object through the API");
            }
            tokio::time::sleep(RETRY).await;
        }
    });
    receiver
}

/// One list, then its watch until the API server ends it (a timeout, a compaction).
async fn list_and_watch<K, T>(
    api: &Api<K>,
    by_name: &str,
    sender: &watch::Sender<T>,
    view: fn(Option<K>) -> T,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    T: PartialEq,
{
    let list = api.list(&ListParams::default().fields(by_name)).await?;
    let version = list.metadata.resource_version.clone().unwrap_or_default();
    publish(sender, view(list.items.into_iter().next()));
    let params = WatchParams::default().fields(by_name).timeout(290);
    let mut events = api.watch(&params, &version).await?.boxed();
    while let Some(event) = events.try_next().await? {
        match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                publish(sender, view(Some(object)));
            }
            WatchEvent::Deleted(_) => publish(sender, view(None)),
            WatchEvent::Bookmark(_) => {}
            // An expired version: list again.
            WatchEvent::Error(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Sends `value` only when it differs from what the receivers hold.
pub fn publish<T: PartialEq>(sender: &watch::Sender<T>, value: T) {
    sender.send_if_modified(|current| {
        let changed = *current != value;
        *current = value;
        changed
    });
}
