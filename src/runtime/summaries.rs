//! Caches that keep a summary of each object instead of the object: for the children a reconcile
//! reads little of. A reflector store keeps a deserialized k8s-openapi object per entry (its
//! `ObjectMeta` alone is ~0.5 KB before any string, and a map of one entry costs a whole B-tree
//! node); here an entry is its name and its summary, and the namespace is held once per
//! namespace. Two summaries exist: an object's packed JSON, for the kinds only an apply's
//! comparison reads (`packed`), and the few facts read of a Secret (`secret_facts`).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use kube::Resource;
use kube::runtime::watcher;
use tokio::sync::watch;

/// What a [`SummaryStore`] keeps of an object of kind `K`.
pub trait Summary<K>: Sized {
    /// The summary of `object`; `None` keeps nothing (an object that cannot be summarized).
    fn of(object: &K) -> Option<Self>;
}

/// Summaries by namespace, then name.
type Entries<V> = HashMap<Arc<str>, HashMap<Box<str>, V>>;

/// The readable half: cheap to clone, shared with the watch that fills it.
pub struct SummaryStore<K, V> {
    entries: Arc<RwLock<Entries<V>>>,
    ready: watch::Receiver<bool>,
    kind: PhantomData<fn() -> K>,
}

impl<K, V> Clone for SummaryStore<K, V> {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
            ready: self.ready.clone(),
            kind: PhantomData,
        }
    }
}

/// The watch ended before the cache was filled once.
#[derive(Debug, thiserror::Error)]
#[error("the watch of a cache ended before its first list")]
pub struct CacheEnded;

/// The writing half, owned by the watch that fills the store.
pub struct SummaryWriter<K, V> {
    entries: Arc<RwLock<Entries<V>>>,
    ready: watch::Sender<bool>,
    /// The entries of a relist in progress: the store keeps serving the old ones until the
    /// list is complete, as a reflector does.
    relist: Option<Entries<V>>,
    kind: PhantomData<fn() -> K>,
}

/// An empty store and the writer that fills it.
pub fn summary_store<K, V>() -> (SummaryStore<K, V>, SummaryWriter<K, V>) {
    let entries = Arc::new(RwLock::new(Entries::new()));
    let (sender, receiver) = watch::channel(false);
    let store = SummaryStore {
        entries: entries.clone(),
        ready: receiver,
        kind: PhantomData,
    };
    let writer = SummaryWriter {
        entries,
        ready: sender,
        relist: None,
        kind: PhantomData,
    };
    (store, writer)
}

impl<K: Resource, V: Summary<K> + PartialEq> SummaryStore<K, V> {
    /// A filled store holding `objects` (tests, and callers that list themselves).
    pub fn of(objects: impl IntoIterator<Item = K>) -> Self {
        let (store, mut writer) = summary_store();
        writer.apply(watcher::Event::Init);
        for object in objects {
            writer.apply(watcher::Event::InitApply(object));
        }
        writer.apply(watcher::Event::InitDone);
        // The store keeps its entries and stays ready without its writer.
        store
    }
}

impl<K, V> SummaryStore<K, V> {
    /// `read` applied to the summary of `name` in `namespace`, if the watch has seen it.
    pub fn with<T>(&self, namespace: &str, name: &str, read: impl FnOnce(&V) -> T) -> Option<T> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        Some(read(entries.get(namespace)?.get(name)?))
    }

    /// `read` applied to every summary with its namespace and name.
    pub fn map_all<T>(&self, mut read: impl FnMut(&str, &str, &V) -> T) -> Vec<T> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .flat_map(|(ns, names)| names.iter().map(move |(name, v)| (ns, name, v)))
            .map(|(ns, name, v)| read(ns, name, v))
            .collect()
    }

    /// How many objects the store holds.
    pub fn len(&self) -> usize {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.values().map(HashMap::len).sum()
    }

    /// Whether the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until the first list has filled the store. Every waiter is woken.
    pub async fn wait_until_ready(&self) -> Result<(), CacheEnded> {
        let mut ready = self.ready.clone();
        ready
            .wait_for(|ready| *ready)
            .await
            .map_err(|_| CacheEnded)?;
        Ok(())
    }
}

impl<K: Resource, V: Summary<K> + PartialEq> SummaryWriter<K, V> {
    /// Applies one watch event, as a reflector's writer does, and says whether it changed what
    /// the store holds of an object: a new or different summary, or a deletion (every object of
    /// a relist counts as changed). A change the summary does not keep (a pod's container
    /// statuses, a status field no reconcile reads) gives a reconcile nothing new to act on.
    pub fn apply(&mut self, event: watcher::Event<K>) -> bool {
        match event {
            watcher::Event::Init => {
                self.relist = Some(Entries::new());
                false
            }
            watcher::Event::InitApply(object) => {
                if let Some(relist) = self.relist.as_mut() {
                    insert(relist, &object);
                }
                true
            }
            watcher::Event::InitDone => {
                let relist = self.relist.take().unwrap_or_default();
                *self.entries.write().unwrap_or_else(|e| e.into_inner()) = relist;
                self.ready.send_replace(true);
                false
            }
            watcher::Event::Apply(object) => insert(
                &mut self.entries.write().unwrap_or_else(|e| e.into_inner()),
                &object,
            ),
            watcher::Event::Delete(object) => {
                let meta = object.meta();
                let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
                let namespace = meta.namespace.as_deref().unwrap_or_default();
                let (Some(names), Some(name)) = (entries.get_mut(namespace), &meta.name) else {
                    return false;
                };
                let removed = names.remove(name.as_str()).is_some();
                if names.is_empty() {
                    entries.remove(namespace);
                }
                removed
            }
        }
    }
}

/// Keeps `object`'s summary; whether it differs from the one kept before (or is new).
fn insert<K: Resource, V: Summary<K> + PartialEq>(entries: &mut Entries<V>, object: &K) -> bool {
    let meta = object.meta();
    let (Some(name), Some(summary)) = (meta.name.as_deref(), V::of(object)) else {
        return false;
    };
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let names = match entries.get_mut(namespace) {
        Some(names) => names,
        None => entries.entry(Arc::from(namespace)).or_default(),
    };
    if names.get(name) == Some(&summary) {
        return false;
    }
    names.insert(name.into(), summary);
    true
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    /// A summary of a ConfigMap: its number of keys.
    #[derive(PartialEq)]
    struct Keys(usize);

    impl Summary<ConfigMap> for Keys {
        fn of(object: &ConfigMap) -> Option<Self> {
            Some(Keys(object.data.as_ref().map_or(0, |d| d.len())))
        }
    }

    fn config_map(name: &str, keys: usize) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.to_owned());
        object.metadata.namespace = Some("prod".to_owned());
        object.data = Some((0..keys).map(|k| (k.to_string(), String::new())).collect());
        object
    }

    fn keys(store: &SummaryStore<ConfigMap, Keys>, name: &str) -> Option<usize> {
        store.with("prod", name, |k| k.0)
    }

    #[test]
    fn changes_and_deletions_are_followed_and_a_relist_replaces_the_whole_store() {
        let (store, mut writer) = summary_store::<ConfigMap, Keys>();
        writer.apply(watcher::Event::Init);
        writer.apply(watcher::Event::InitApply(config_map("a", 1)));
        writer.apply(watcher::Event::InitApply(config_map("b", 1)));
        writer.apply(watcher::Event::InitDone);
        writer.apply(watcher::Event::Apply(config_map("a", 2)));
        assert_eq!(keys(&store, "a"), Some(2));
        assert_eq!(
            store.with("staging", "a", |k| k.0),
            None,
            "namespaces are apart"
        );
        writer.apply(watcher::Event::Delete(config_map("b", 1)));
        assert_eq!(keys(&store, "b"), None);

        // A relist in progress serves the old entries; its end drops those not listed.
        writer.apply(watcher::Event::Init);
        writer.apply(watcher::Event::InitApply(config_map("c", 1)));
        assert!(keys(&store, "a").is_some());
        writer.apply(watcher::Event::InitDone);
        assert_eq!(keys(&store, "a"), None);
        assert!(keys(&store, "c").is_some());
        assert_eq!(store.len(), 1);
        assert_eq!(
            store.map_all(|ns, name, k| format!("{ns}/{name}:{}", k.0)),
            ["prod/c:1"]
        );
    }

    #[test]
    fn a_change_is_one_the_summary_keeps_and_every_deletion_and_relisted_object_is_one() {
        let (_store, mut writer) = summary_store::<ConfigMap, Keys>();
        assert!(!writer.apply(watcher::Event::Init));
        assert!(writer.apply(watcher::Event::InitApply(config_map("a", 1))));
        assert!(!writer.apply(watcher::Event::InitDone));
        assert!(
            writer.apply(watcher::Event::Apply(config_map("b", 1))),
            "new"
        );
        let mut relabelled = config_map("b", 1);
        relabelled.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
        assert!(
            !writer.apply(watcher::Event::Apply(relabelled)),
            "a change the summary does not keep"
        );
        assert!(writer.apply(watcher::Event::Apply(config_map("b", 2))));
        assert!(writer.apply(watcher::Event::Delete(config_map("b", 2))));
        assert!(
            !writer.apply(watcher::Event::Delete(config_map("b", 2))),
            "already gone"
        );
    }

    #[tokio::test]
    async fn every_waiter_is_woken_by_the_first_list_and_an_ended_watch_is_an_error() {
        let (store, mut writer) = summary_store::<ConfigMap, Keys>();
        let waiters =
            [store.clone(), store.clone()].map(|s| async move { s.wait_until_ready().await });
        writer.apply(watcher::Event::Init);
        writer.apply(watcher::Event::InitDone);
        for result in futures::future::join_all(waiters).await {
            assert!(result.is_ok());
        }

        let (store, writer) = summary_store::<ConfigMap, Keys>();
        drop(writer);
        assert!(store.wait_until_ready().await.is_err());
    }
}
