//! Which objects of a shared watch belong to which cluster, kept beside its store: a reconcile
//! reads its own cluster's Backups and Jobs instead of every one of the fleet. Without it each
//! reconcile cloned and filtered the whole store, a cost that grows with the fleet times its
//! backup history (10,000 clusters keeping seven Backups each: 70,000 a reconcile).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use crate::crd::Backup;
use crate::resources::CLUSTER_LABEL;

/// The cluster an object belongs to (a Backup's `spec.cluster`, a Job's cluster label).
pub type ClusterOf<K> = fn(&K) -> Option<&str>;

/// A Backup's cluster: the one it was taken of.
pub fn backup_cluster(backup: &Backup) -> Option<&str> {
    Some(backup.spec.cluster.name.as_str())
}

/// A Job's cluster: its `tusk.dev/cluster` label, which every Job Tusk makes carries (the
/// scheduled runs through their CronJob's template).
pub fn job_cluster(job: &Job) -> Option<&str> {
    job.labels().get(CLUSTER_LABEL).map(String::as_str)
}

/// Names by (namespace, cluster), and where each object was filed, so that an object whose
/// cluster changed, or that is deleted, leaves its old entry.
#[derive(Default)]
struct Index {
    names: HashMap<(String, String), BTreeSet<String>>,
    filed: HashMap<(String, String), String>,
}

impl Index {
    fn file<K: Resource>(&mut self, object: &K, cluster_of: ClusterOf<K>) {
        let meta = object.meta();
        let (Some(namespace), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref())
        else {
            return;
        };
        self.remove(namespace, name);
        if let Some(cluster) = cluster_of(object) {
            let key = (namespace.to_owned(), cluster.to_owned());
            self.names.entry(key).or_default().insert(name.to_owned());
            let place = (namespace.to_owned(), name.to_owned());
            self.filed.insert(place, cluster.to_owned());
        }
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        let place = (namespace.to_owned(), name.to_owned());
        let Some(cluster) = self.filed.remove(&place) else {
            return;
        };
        let key = (place.0, cluster);
        if let Some(names) = self.names.get_mut(&key) {
            names.remove(name);
            if names.is_empty() {
                self.names.remove(&key);
            }
        }
    }
}

/// The readable half: a cluster's objects, by name, from the store.
pub struct ByCluster<K: Resource<DynamicType = ()> + Clone + 'static> {
    index: Arc<RwLock<Index>>,
    store: Store<K>,
    cluster_of: ClusterOf<K>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Clone for ByCluster<K> {
    fn clone(&self) -> Self {
        Self {
            index: self.index.clone(),
            store: self.store.clone(),
            cluster_of: self.cluster_of,
        }
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> ByCluster<K> {
    /// An index of what `store` holds now (tests, and stores that no watch changes).
    pub fn of(store: Store<K>, cluster_of: ClusterOf<K>) -> Self {
        let mut index = Index::default();
        for object in store.state() {
            index.file(object.as_ref(), cluster_of);
        }
        Self {
            index: Arc::new(RwLock::new(index)),
            store,
            cluster_of,
        }
    }

    /// The objects of cluster `cluster` in `namespace`, by name. The index is written before
    /// the store: an object it names that the store has not taken yet is left out, as it
    /// would be had the watch event not arrived.
    pub fn objects(&self, namespace: &str, cluster: &str) -> Vec<Arc<K>> {
        let names: Vec<String> = {
            let index = self.index.read().unwrap_or_else(|e| e.into_inner());
            let key = (namespace.to_owned(), cluster.to_owned());
            index
                .names
                .get(&key)
                .map(|names| names.iter().cloned().collect())
                .unwrap_or_default()
        };
        names
            .iter()
            .filter_map(|name| self.store.get(&ObjectRef::new(name).within(namespace)))
            .filter(|object| (self.cluster_of)(object) == Some(cluster))
            .collect()
    }
}

/// The writing half, fed every event of the watch before its store takes it.
pub struct ByClusterWriter<K> {
    index: Arc<RwLock<Index>>,
    /// The index of a relist in progress, swapped in when it completes (as the store does).
    relist: Option<Index>,
    cluster_of: ClusterOf<K>,
}

/// An empty index over `store` and the writer that fills it.
pub fn by_cluster<K: Resource<DynamicType = ()> + Clone + 'static>(
    store: Store<K>,
    cluster_of: ClusterOf<K>,
) -> (ByCluster<K>, ByClusterWriter<K>) {
    let index = Arc::new(RwLock::new(Index::default()));
    let reader = ByCluster {
        index: index.clone(),
        store,
        cluster_of,
    };
    let writer = ByClusterWriter {
        index,
        relist: None,
        cluster_of,
    };
    (reader, writer)
}

impl<K: Resource> ByClusterWriter<K> {
    /// Applies one watch event.
    pub fn apply(&mut self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Init => self.relist = Some(Index::default()),
            watcher::Event::InitApply(object) => {
                if let Some(relist) = self.relist.as_mut() {
                    relist.file(object, self.cluster_of);
                }
            }
            watcher::Event::InitDone => {
                let relist = self.relist.take().unwrap_or_default();
                *self.index.write().unwrap_or_else(|e| e.into_inner()) = relist;
            }
            watcher::Event::Apply(object) => {
                let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
                index.file(object, self.cluster_of);
            }
            watcher::Event::Delete(object) => {
                let meta = object.meta();
                if let (Some(namespace), Some(name)) = (&meta.namespace, &meta.name) {
                    let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
                    index.remove(namespace, name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::store;

    use super::*;

    fn cluster_of(object: &ConfigMap) -> Option<&str> {
        object
            .metadata
            .labels
            .as_ref()?
            .get("cluster")
            .map(String::as_str)
    }

    fn object(namespace: &str, name: &str, cluster: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.namespace = Some(namespace.to_owned());
        object.metadata.name = Some(name.to_owned());
        object.metadata.labels = Some([("cluster".to_owned(), cluster.to_owned())].into());
        object
    }

    /// The index and the store fed the same events, as the watch feeds them.
    struct Fed {
        reader: ByCluster<ConfigMap>,
        index: ByClusterWriter<ConfigMap>,
        store: store::Writer<ConfigMap>,
    }

    impl Fed {
        fn new() -> Self {
            let store = store::Writer::default();
            let (reader, index) = by_cluster(store.as_reader(), cluster_of);
            Self {
                reader,
                index,
                store,
            }
        }

        fn apply(&mut self, event: watcher::Event<ConfigMap>) {
            self.index.apply(&event);
            self.store.apply_watcher_event(&event);
        }

        fn names(&self, namespace: &str, cluster: &str) -> Vec<String> {
            let objects = self.reader.objects(namespace, cluster);
            objects
                .iter()
                .filter_map(|o| o.metadata.name.clone())
                .collect()
        }
    }

    #[test]
    fn a_cluster_sees_its_own_objects_only() {
        let mut fed = Fed::new();
        fed.apply(watcher::Event::Init);
        for (ns, name, cluster) in [("a", "b1", "db"), ("a", "b2", "other"), ("b", "b3", "db")] {
            fed.apply(watcher::Event::InitApply(object(ns, name, cluster)));
        }
        fed.apply(watcher::Event::InitDone);
        assert_eq!(fed.names("a", "db"), ["b1"]);
        assert_eq!(fed.names("a", "other"), ["b2"]);
        assert_eq!(fed.names("b", "db"), ["b3"]);
        assert!(fed.names("a", "none").is_empty());
    }

    #[test]
    fn applies_deletes_and_a_changed_cluster_move_the_entries() {
        let mut fed = Fed::new();
        fed.apply(watcher::Event::Init);
        fed.apply(watcher::Event::InitDone);
        fed.apply(watcher::Event::Apply(object("a", "b1", "db")));
        fed.apply(watcher::Event::Apply(object("a", "b2", "db")));
        assert_eq!(fed.names("a", "db"), ["b1", "b2"]);
        fed.apply(watcher::Event::Apply(object("a", "b2", "other")));
        assert_eq!(fed.names("a", "db"), ["b1"]);
        assert_eq!(fed.names("a", "other"), ["b2"]);
        fed.apply(watcher::Event::Delete(object("a", "b1", "db")));
        assert!(fed.names("a", "db").is_empty());
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_completes() {
        let mut fed = Fed::new();
        fed.apply(watcher::Event::Init);
        fed.apply(watcher::Event::InitApply(object("a", "gone", "db")));
        fed.apply(watcher::Event::InitDone);
        fed.apply(watcher::Event::Init);
        fed.apply(watcher::Event::InitApply(object("a", "new", "db")));
        // Until the relist completes, the old list is served, as the store serves it.
        assert_eq!(fed.names("a", "db"), ["gone"]);
        fed.apply(watcher::Event::InitDone);
        assert_eq!(fed.names("a", "db"), ["new"]);
    }

    #[test]
    fn an_index_of_a_filled_store() {
        let mut store = store::Writer::default();
        store.apply_watcher_event(&watcher::Event::Apply(object("a", "b1", "db")));
        let reader = ByCluster::of(store.as_reader(), cluster_of);
        assert_eq!(reader.objects("a", "db").len(), 1);
        assert!(reader.objects("a", "other").is_empty());
    }
}
