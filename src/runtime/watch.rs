//! Watches that feed both a cache (read by reconciles to skip no-op writes) and the
//! controllers' triggers, and the scope they cover.

use std::fmt::Debug;
use std::future::Future;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::reflector::{self, ReflectHandle, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tracing::warn;

/// Events buffered per subscriber of a shared watch.
const SHARED_BUFFER: usize = 1024;

/// Where the controller looks for clusters.
#[derive(Clone, Debug)]
pub enum Scope {
    AllNamespaces,
    Namespace(String),
}

impl Scope {
    pub fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match self {
            Self::AllNamespaces => Api::all(client.clone()),
            Self::Namespace(ns) => Api::namespaced(client.clone(), ns),
        }
    }
}

/// The watches of the clusters' children: one scope, one label selector.
pub struct ChildWatches<'a> {
    pub scope: &'a Scope,
    pub client: &'a Client,
    pub config: watcher::Config,
}

impl ChildWatches<'_> {
    /// A watch of the children of kind `K` that keeps `Store<K>` current and yields every
    /// touched object (deletions included, so a child deleted out of band triggers its owner).
    /// `compact` shrinks each object before it is cached (at least [`drop_managed_fields`]; see
    /// `runtime::compact`). The returned future drives the watch on its own: the caches must
    /// fill even while every reconcile waits for them, so they cannot depend on the controller
    /// polling its trigger streams.
    pub fn cached<K>(
        &self,
        compact: fn(&mut K),
    ) -> (
        Store<K>,
        impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
        impl Future<Output = ()> + Send + 'static,
    )
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        let (reader, writer) = reflector::store();
        // Unbounded: a trigger is an object the cache already holds, so the queue is bounded by
        // the number of changes while reconciles are busy.
        let (triggers, stream) = futures::channel::mpsc::unbounded();
        let driver = watcher(self.scope.api(self.client), self.config.clone())
            .default_backoff()
            .modify(compact)
            .reflect(writer)
            .touched_objects()
            .for_each(move |object| {
                // The receiver only goes away when the controller has stopped.
                let _ = triggers.unbounded_send(object);
                futures::future::ready(())
            });
        (reader, stream, driver)
    }
}

/// A watch of `K` whose cache and events are shared by both controllers. The returned future
/// drives the watch and must be polled alongside them.
pub fn shared_watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> (
    Store<K>,
    ReflectHandle<K>,
    impl Future<Output = ()> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store_shared(SHARED_BUFFER);
    // A shared store always hands out subscriptions.
    let handle = writer
        .subscribe()
        .expect("store_shared writers are subscribable");
    let driver = watcher(api, config)
        .default_backoff()
        .modify(drop_managed_fields)
        .reflect_shared(writer)
        .for_each(|event| async move {
            if let Err(e) = event {
                warn!(error = %e, "watch error");
            }
        });
    (reader, handle, driver)
}

/// Drops `metadata.managedFields` before an object is cached or handed on: nothing reads them
/// (applies compare fields, not owners), and they are a large part of every object, so caches
/// of a thousand clusters' children hold far less.
pub fn drop_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

    #[test]
    fn cached_objects_carry_no_managed_fields_and_keep_the_rest() {
        let mut object = ConfigMap::default();
        object.metadata.name = Some("demo-config".into());
        object.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("tusk-operator".into()),
            ..Default::default()
        }]);
        drop_managed_fields(&mut object);
        assert_eq!(object.metadata.managed_fields, None);
        assert_eq!(object.metadata.name.as_deref(), Some("demo-config"));
    }
}
