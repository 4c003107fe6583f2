//! Watches that feed both a cache (read by reconciles to skip no-op writes) and the
//! controllers' triggers, and the scope they cover.

use std::fmt::Debug;
use std::future::Future;

use futures::channel::mpsc::UnboundedSender;
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tracing::warn;

use super::by_cluster::{ByCluster, ClusterOf, by_cluster};
use super::summaries::{Summary, SummaryStore, summary_store};

use crate::crd::PostgreSQL;
use crate::resources::CLUSTER_LABEL;

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

/// What a changed child triggers: the reconcile of its cluster.
pub type Trigger = ObjectRef<PostgreSQL>;

/// The watches of the clusters' children: one scope, one label selector, and one queue of the
/// clusters their changes trigger.
pub struct ChildWatches<'a> {
    pub scope: &'a Scope,
    pub client: &'a Client,
    pub config: watcher::Config,
    pub triggers: UnboundedSender<Trigger>,
}

/// A namespaced kind whose objects a child watch keeps as summaries.
pub trait SummarizedKind:
    Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + 'static
{
}

impl<K> SummarizedKind for K where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + 'static
{
}

/// A namespaced kind whose objects a child watch caches whole (a reflector store shares them
/// across threads, hence `Sync`).
pub trait CachedKind: SummarizedKind + Sync {}

impl<K: SummarizedKind + Sync> CachedKind for K {}

impl ChildWatches<'_> {
    /// A watch of the children of kind `K` that keeps `Store<K>` current and queues the cluster
    /// of every touched object (`trigger`; deletions included, so a child deleted out of band
    /// triggers its owner). Only the cluster's reference is queued, never the object: the
    /// queue grows with changes while reconciles are busy, not with their size. `compact`
    /// shrinks each object before it is cached (at least [`drop_managed_fields`]; see
    /// `runtime::compact`). The returned future drives the watch on its own: the caches must
    /// fill even while every reconcile waits for them, so they cannot depend on the controller
    /// polling its triggers.
    pub fn cached<K>(
        &self,
        compact: fn(&mut K),
        trigger: fn(&K) -> Option<Trigger>,
    ) -> (Store<K>, BoxFuture<'static, ()>)
    where
        K: CachedKind,
    {
        let (reader, writer) = reflector::store();
        let triggers = self.triggers.clone();
        let driver = watcher(self.scope.api(self.client), self.config.clone())
            .default_backoff()
            .modify(compact)
            .reflect(writer)
            .touched_objects()
            .for_each(move |object| {
                if let Ok(object) = &object {
                    // The receiver only goes away when the controller has stopped.
                    if let Some(cluster) = trigger(object) {
                        let _ = triggers.unbounded_send(cluster);
                    }
                }
                futures::future::ready(())
            });
        (reader, futures::FutureExt::boxed(driver))
    }

    /// A watch of the children of kind `K` kept as summaries `V`: it keeps a [`SummaryStore`]
    /// current (nothing deserialized is kept) and queues the cluster of every object whose
    /// summary changed (created, changed as the summary sees it, deleted, relisted). `narrow`
    /// adds to the label selector (a kind of which other controllers also label objects as the
    /// cluster's).
    pub fn summarized<K, V>(
        &self,
        trigger: fn(&K) -> Option<Trigger>,
        narrow: Option<&str>,
    ) -> (SummaryStore<K, V>, BoxFuture<'static, ()>)
    where
        K: SummarizedKind,
        V: Summary<K> + PartialEq + Send + Sync + 'static,
    {
        self.summarized_with_lane(trigger, narrow, |_: &K| None, self.triggers.clone())
    }

    /// As [`Self::summarized`], and also queues on `lane` the cluster `to_lane` picks for an
    /// object (the database pods: see `clusters::primary_lane`).
    pub fn summarized_with_lane<K, V>(
        &self,
        trigger: fn(&K) -> Option<Trigger>,
        narrow: Option<&str>,
        to_lane: impl Fn(&K) -> Option<Trigger> + Send + 'static,
        lane: UnboundedSender<Trigger>,
    ) -> (SummaryStore<K, V>, BoxFuture<'static, ()>)
    where
        K: SummarizedKind,
        V: Summary<K> + PartialEq + Send + Sync + 'static,
    {
        let (reader, mut writer) = summary_store();
        let triggers = self.triggers.clone();
        let mut config = self.config.clone();
        if let Some(narrow) = narrow {
            let selector = match config.label_selector.take() {
                Some(common) => format!("{common},{narrow}"),
                None => narrow.to_owned(),
            };
            config = config.labels(&selector);
        }
        let driver = watcher(self.scope.api(self.client), config)
            .default_backoff()
            .for_each(move |event| {
                if let Ok(event) = event {
                    let (touched, laned) = match &event {
                        watcher::Event::Apply(object)
                        | watcher::Event::Delete(object)
                        | watcher::Event::InitApply(object) => (trigger(object), to_lane(object)),
                        watcher::Event::Init | watcher::Event::InitDone => (None, None),
                    };
                    // A change the summary does not keep gives the reconcile nothing new (it
                    // reads only the summary): a pod's scheduling and container statuses each
                    // queued its cluster, 13 % of the reconciles of 1,000 new clusters.
                    let changed = writer.apply(event);
                    // The receivers only go away when the controllers have stopped.
                    if let Some(cluster) = touched.filter(|_| changed) {
                        let _ = triggers.unbounded_send(cluster);
                    }
                    if let Some(cluster) = laned {
                        let _ = lane.unbounded_send(cluster);
                    }
                }
                futures::future::ready(())
            });
        (reader, futures::FutureExt::boxed(driver))
    }
}

/// The cluster that owns `object`, by its owner reference.
pub fn owning_cluster<K: Resource>(object: &K) -> Option<Trigger> {
    let namespace = object.meta().namespace.as_deref()?;
    let owner = object.meta().owner_references.as_ref()?.iter().find(|o| {
        o.kind == PostgreSQL::kind(&()) && o.api_version == PostgreSQL::api_version(&())
    })?;
    Some(ObjectRef::new(&owner.name).within(namespace))
}

/// The cluster named by `object`'s `tusk.dev/cluster` label (database pods: their owner is the
/// StatefulSet).
pub fn labelled_cluster<K: Resource>(object: &K) -> Option<Trigger> {
    let namespace = object.meta().namespace.as_deref()?;
    let cluster = object.meta().labels.as_ref()?.get(CLUSTER_LABEL)?;
    Some(ObjectRef::new(cluster).within(namespace))
}

/// A watch of `K` whose cache and events are shared by both controllers, with its objects
/// indexed by the cluster `cluster_of` names. The returned future drives the watch and must be
/// polled alongside them.
pub fn shared_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    cluster_of: ClusterOf<K>,
) -> (
    Store<K>,
    ByCluster<K>,
    ReflectHandle<K>,
    impl Future<Output = ()> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store_shared(SHARED_BUFFER);
    let (index, mut index_writer) = by_cluster(reader.clone(), cluster_of);
    // A shared store always hands out subscriptions.
    let handle = writer
        .subscribe()
        .expect("store_shared writers are subscribable");
    let driver = watcher(api, config)
        .default_backoff()
        .modify(drop_managed_fields)
        .map_ok(move |event| {
            index_writer.apply(&event);
            event
        })
        .reflect_shared(writer)
        .for_each(|event| async move {
            if let Err(e) = event {
                warn!(error = %e, "watch error");
            }
        });
    (reader, index, handle, driver)
}

/// Signals every relist of a watch after its first list ends. kube's controller schedules each
/// object of a relist as it is listed, but the store takes the new list only once the list is
/// complete: an object created since the previous list (while the watch was down, or during a
/// `410 Expired` restart) is looked up in the old store, not found and dropped (kube-rs#1167),
/// and nothing triggers it again. The signal feeds `reconcile_all_on`, which runs after the
/// store holds the list. The first list needs none: the controller holds its runner until the
/// store is ready.
pub struct RelistSignal {
    lists: usize,
    relisted: UnboundedSender<()>,
}

impl RelistSignal {
    pub fn new(relisted: UnboundedSender<()>) -> Self {
        Self { lists: 0, relisted }
    }

    /// Observes one event of the watch (after its reflector applied it).
    pub fn observe<K, E>(&mut self, event: &Result<watcher::Event<K>, E>) {
        if let Ok(watcher::Event::InitDone) = event {
            self.lists += 1;
            if self.lists > 1 {
                // The receiver only goes away when the controller has stopped.
                let _ = self.relisted.unbounded_send(());
            }
        }
    }
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
    fn a_child_triggers_the_cluster_that_owns_it_and_a_pod_the_one_it_is_labelled_with() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let mut object = ConfigMap::default();
        object.metadata.namespace = Some("prod".into());
        let owner = |kind: &str, api_version: &str| OwnerReference {
            kind: kind.into(),
            api_version: api_version.into(),
            name: "demo".into(),
            ..OwnerReference::default()
        };
        object.metadata.owner_references = Some(vec![
            owner("StatefulSet", "apps/v1"),
            owner("PostgreSQL", "tusk.dev/v1alpha1"),
        ]);
        assert_eq!(
            owning_cluster(&object),
            Some(ObjectRef::new("demo").within("prod"))
        );
        object.metadata.owner_references = Some(vec![owner("PostgreSQL", "example.com/v1")]);
        assert_eq!(owning_cluster(&object), None, "another group's PostgreSQL");
        object.metadata.labels = Some([(CLUSTER_LABEL.to_owned(), "shop".to_owned())].into());
        assert_eq!(
            labelled_cluster(&object),
            Some(ObjectRef::new("shop").within("prod"))
        );
    }

    #[test]
    fn every_relist_after_the_first_list_is_signalled_once_it_is_complete() {
        let (sender, mut signals) = futures::channel::mpsc::unbounded();
        let mut signal = RelistSignal::new(sender);
        let mut count = |events: Vec<watcher::Event<ConfigMap>>| {
            for event in events {
                signal.observe::<_, ()>(&Ok(event));
            }
            std::iter::from_fn(|| signals.try_recv().ok()).count()
        };
        let listed = || watcher::Event::InitApply(ConfigMap::default());
        let first = vec![watcher::Event::Init, listed(), watcher::Event::InitDone];
        assert_eq!(count(first), 0, "the first list: the runner waits for it");
        let changed = vec![watcher::Event::Apply(ConfigMap::default())];
        assert_eq!(count(changed), 0);
        let half = vec![watcher::Event::Init, listed()];
        assert_eq!(count(half), 0, "not before the store holds the new list");
        assert_eq!(count(vec![watcher::Event::InitDone]), 1);
        let again = vec![watcher::Event::Init, watcher::Event::InitDone];
        assert_eq!(count(again), 1);
    }

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
