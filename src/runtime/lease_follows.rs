//! A switchover in progress is followed through a watch of its cluster's Lease, by name: the
//! old primary's release reaches the primary lane at once rather than at the step's next look
//! (every 200 ms), and the handover, which waits on it, follows as soon as the target has
//! replayed the final WAL. One watch per switchover, ended with it: an idle cluster, and a
//! fleet, cost nothing (a watch of every Lease would bring each renewal, once a second per
//! cluster, to the operator).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};

use super::watch::Trigger;

/// Longer than a switchover may take before it is abandoned; the step's own looks go on
/// regardless, so a follow that ends early only costs speed.
const FOLLOW_LIMIT: Duration = Duration::from_secs(120);

/// The Leases followed now, and the lane their changes go to (`None`: nothing is followed,
/// as in tests without a lane).
#[derive(Default)]
pub struct LeaseFollows {
    lane: Option<UnboundedSender<Trigger>>,
    following: Mutex<HashSet<String>>,
}

impl LeaseFollows {
    pub fn new(lane: UnboundedSender<Trigger>) -> Self {
        Self {
            lane: Some(lane),
            following: Mutex::default(),
        }
    }

    /// Follows Lease `name` of `api` while `still` holds for it, queuing `cluster` on the lane
    /// at each change (and once when it ends); a Lease already followed is left to its watch.
    pub fn follow(
        self: &Arc<Self>,
        api: Api<Lease>,
        name: String,
        cluster: Trigger,
        still: fn(&Lease) -> bool,
    ) {
        let Some(lane) = self.lane.clone() else {
            return;
        };
        let key = cluster.to_string();
        let new = self
            .following
            .lock()
            .is_ok_and(|mut following| following.insert(key.clone()));
        if !new {
            return;
        }
        let follows = self.clone();
        tokio::spawn(async move {
            let follow = follow_while(&api, &name, still, || {
                tracing::debug!(lease = name, "a followed Lease changed");
                // The lane is gone only when the controllers have stopped.
                let _ = lane.unbounded_send(cluster.clone());
            });
            // Ended by an error or the limit, the step's own looks carry the switchover on.
            if let Ok(Err(e)) = tokio::time::timeout(FOLLOW_LIMIT, follow).await {
                tracing::debug!(lease = name, error = %e, "following a Lease");
            }
            if let Ok(mut following) = follows.following.lock() {
                following.remove(&key);
            }
        });
    }

    /// How many Leases are followed now.
    pub fn len(&self) -> usize {
        self.following.lock().map_or(0, |following| following.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Lists and watches Lease `name` until `still` no longer holds for it (or it is gone),
/// calling `changed` at each change and at the end.
async fn follow_while(
    api: &Api<Lease>,
    name: &str,
    still: fn(&Lease) -> bool,
    changed: impl Fn(),
) -> Result<(), kube::Error> {
    let by_name = format!("metadata.name={name}");
    loop {
        let list = api.list(&ListParams::default().fields(&by_name)).await?;
        let version = list.metadata.resource_version.clone().unwrap_or_default();
        if !list.items.first().is_some_and(still) {
            changed();
            return Ok(());
        }
        let params = WatchParams::default().fields(&by_name).timeout(60);
        let mut events = api.watch(&params, &version).await?.boxed();
        while let Some(event) = events.try_next().await? {
            match event {
                WatchEvent::Added(lease) | WatchEvent::Modified(lease) => {
                    changed();
                    if !still(&lease) {
                        return Ok(());
                    }
                }
                WatchEvent::Deleted(_) => {
                    changed();
                    return Ok(());
                }
                WatchEvent::Bookmark(_) => {}
                // An expired version: list again.
                WatchEvent::Error(_) => break,
            }
        }
    }
}
