//! Caches of the children nothing reads but an apply's comparison (ConfigMaps, Services,
//! accounts, Roles, bindings, disruption budgets): each object is kept as its deflated JSON
//! under its namespace and name, and nothing else. A reflector store keeps a deserialized
//! k8s-openapi object per entry (its `ObjectMeta` alone is ~0.5 KB before any string) and its
//! key; at a thousand clusters these six kinds held ~16 MiB that way, ~1.8 KB per object even
//! with the JSON packed into an annotation. Here an entry is its name and its packed bytes, and
//! the namespace is held once per namespace. The comparison unpacks the JSON on demand
//! ([`PackedStore::get`]), so "already applied?" is still decided on what the server holds.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use kube::Resource;
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;

/// Deflate level: a few thousand small objects at start, one per change after; the ratio is
/// worth the CPU.
const LEVEL: u8 = 6;

/// More than any object the server accepts (objects are capped at ~1.5 MB).
const UNPACKED_LIMIT: usize = 4 << 20;

/// Objects by namespace, then name.
type Objects = HashMap<Arc<str>, HashMap<Box<str>, Box<[u8]>>>;

/// The readable half: cheap to clone, shared with the watch that fills it.
pub struct PackedStore<K> {
    objects: Arc<RwLock<Objects>>,
    ready: watch::Receiver<bool>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for PackedStore<K> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
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
pub struct PackedWriter<K> {
    objects: Arc<RwLock<Objects>>,
    ready: watch::Sender<bool>,
    /// The objects of a relist in progress: the store keeps serving the old ones until the
    /// list is complete, as a reflector does.
    relist: Option<Objects>,
    kind: PhantomData<fn() -> K>,
}

/// An empty store and the writer that fills it.
pub fn packed_store<K>() -> (PackedStore<K>, PackedWriter<K>) {
    let objects = Arc::new(RwLock::new(Objects::new()));
    let (sender, receiver) = watch::channel(false);
    let store = PackedStore {
        objects: objects.clone(),
        ready: receiver,
        kind: PhantomData,
    };
    let writer = PackedWriter {
        objects,
        ready: sender,
        relist: None,
        kind: PhantomData,
    };
    (store, writer)
}

impl<K: Resource + Serialize> PackedStore<K> {
    /// A filled store holding `objects` (tests, and callers that list themselves).
    pub fn of(objects: impl IntoIterator<Item = K>) -> Self {
        let (store, mut writer) = packed_store();
        writer.apply(watcher::Event::Init);
        for object in objects {
            writer.apply(watcher::Event::InitApply(object));
        }
        writer.apply(watcher::Event::InitDone);
        // The store keeps its objects and stays ready without its writer.
        store
    }

    /// The JSON of `name` in `namespace` as the server last sent it (without the server's
    /// bookkeeping and status, which no apply sets), if the watch has seen it. An entry that
    /// cannot be unpacked (never: only [`pack`] writes them) reads as `Null`, which compares as
    /// different, so the apply is sent.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Value> {
        let objects = self.objects.read().unwrap_or_else(|e| e.into_inner());
        let packed = objects.get(namespace)?.get(name)?;
        Some(unpack(packed).unwrap_or(Value::Null))
    }

    /// How many objects the store holds.
    pub fn len(&self) -> usize {
        let objects = self.objects.read().unwrap_or_else(|e| e.into_inner());
        objects.values().map(HashMap::len).sum()
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

impl<K: Resource + Serialize> PackedWriter<K> {
    /// Applies one watch event, as a reflector's writer does.
    pub fn apply(&mut self, event: watcher::Event<K>) {
        match event {
            watcher::Event::Init => self.relist = Some(Objects::new()),
            watcher::Event::InitApply(object) => {
                if let Some(relist) = self.relist.as_mut() {
                    insert(relist, &object);
                }
            }
            watcher::Event::InitDone => {
                let relist = self.relist.take().unwrap_or_default();
                *self.objects.write().unwrap_or_else(|e| e.into_inner()) = relist;
                self.ready.send_replace(true);
            }
            watcher::Event::Apply(object) => {
                insert(
                    &mut self.objects.write().unwrap_or_else(|e| e.into_inner()),
                    &object,
                );
            }
            watcher::Event::Delete(object) => {
                let meta = object.meta();
                let mut objects = self.objects.write().unwrap_or_else(|e| e.into_inner());
                let namespace = meta.namespace.as_deref().unwrap_or_default();
                if let (Some(names), Some(name)) = (objects.get_mut(namespace), &meta.name) {
                    names.remove(name.as_str());
                    if names.is_empty() {
                        objects.remove(namespace);
                    }
                }
            }
        }
    }
}

fn insert<K: Resource + Serialize>(objects: &mut Objects, object: &K) {
    let meta = object.meta();
    let (Some(name), Some(packed)) = (meta.name.as_deref(), pack(object)) else {
        return;
    };
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let names = match objects.get_mut(namespace) {
        Some(names) => names,
        None => objects.entry(Arc::from(namespace)).or_default(),
    };
    names.insert(name.into(), packed);
}

/// The object's JSON without what no apply sets (the server's bookkeeping and the status),
/// deflated. `None` if it does not serialize (it always does: it was just deserialized).
fn pack<K: Serialize>(object: &K) -> Option<Box<[u8]>> {
    let mut json = serde_json::to_value(object).ok()?;
    if let Some(map) = json.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = json.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "managedFields",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
        ] {
            meta.remove(field);
        }
    }
    let text = serde_json::to_vec(&json).ok()?;
    Some(miniz_oxide::deflate::compress_to_vec(&text, LEVEL).into_boxed_slice())
}

fn unpack(packed: &[u8]) -> Option<Value> {
    let text = miniz_oxide::inflate::decompress_to_vec_with_limit(packed, UNPACKED_LIMIT).ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Service};
    use serde_json::json;

    use super::*;
    use crate::runtime::apply::contains;

    fn service(name: &str, port: u16) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "prod", "uid": "u1",
                         "resourceVersion": "7", "creationTimestamp": "2026-11-27T08:00:00Z",
                         "labels": {"app": "db"},
                         "managedFields": [{"manager": "tusk-operator"}]},
            "spec": {"ports": [{"port": port}], "selector": {"app": "db"},
                     "clusterIP": "10.0.0.1", "type": "ClusterIP"},
            "status": {"loadBalancer": {}}
        }))
        .unwrap()
    }

    #[test]
    fn a_packed_object_reads_back_as_the_server_holds_it_without_bookkeeping() {
        let store = PackedStore::of([service("db-rw", 5432)]);
        let actual = store.get("prod", "db-rw").unwrap();
        assert_eq!(actual["spec"]["clusterIP"], "10.0.0.1");
        assert_eq!(actual["metadata"]["labels"]["app"], "db");
        for gone in [
            "managedFields",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            assert!(actual["metadata"].get(gone).is_none(), "{gone}");
        }
        assert!(actual.get("status").is_none());
        let wanted = json!({"metadata": {"name": "db-rw", "labels": {"app": "db"}},
                            "spec": {"ports": [{"port": 5432}], "selector": {"app": "db"}}});
        assert!(contains(&actual, &wanted), "unchanged: no write");
        assert!(
            !contains(&actual, &json!({"spec": {"ports": [{"port": 5433}]}})),
            "a changed port is a write"
        );
        assert_eq!(store.get("prod", "db-ro"), None);
        assert_eq!(store.get("staging", "db-rw"), None, "namespaces are apart");
    }

    #[test]
    fn changes_and_deletions_are_followed_and_a_relist_replaces_the_whole_store() {
        let (store, mut writer) = packed_store::<Service>();
        writer.apply(watcher::Event::Init);
        writer.apply(watcher::Event::InitApply(service("a", 1)));
        writer.apply(watcher::Event::InitApply(service("b", 1)));
        writer.apply(watcher::Event::InitDone);
        writer.apply(watcher::Event::Apply(service("a", 2)));
        assert_eq!(
            store.get("prod", "a").unwrap()["spec"]["ports"][0]["port"],
            2
        );
        writer.apply(watcher::Event::Delete(service("b", 1)));
        assert_eq!(store.get("prod", "b"), None);

        // A relist in progress serves the old objects; its end drops those not listed.
        writer.apply(watcher::Event::Init);
        writer.apply(watcher::Event::InitApply(service("c", 1)));
        assert!(store.get("prod", "a").is_some());
        writer.apply(watcher::Event::InitDone);
        assert_eq!(store.get("prod", "a"), None);
        assert!(store.get("prod", "c").is_some());
        assert_eq!(store.len(), 1);
    }

    #[tokio::test]
    async fn every_waiter_is_woken_by_the_first_list_and_an_ended_watch_is_an_error() {
        let (store, mut writer) = packed_store::<ConfigMap>();
        let waiters =
            [store.clone(), store.clone()].map(|s| async move { s.wait_until_ready().await });
        writer.apply(watcher::Event::Init);
        writer.apply(watcher::Event::InitDone);
        for result in futures::future::join_all(waiters).await {
            assert!(result.is_ok());
        }

        let (store, writer) = packed_store::<ConfigMap>();
        drop(writer);
        assert!(store.wait_until_ready().await.is_err());
    }

    #[test]
    fn a_packed_service_is_smaller_than_its_json() {
        let object = service("db-rw", 5432);
        let json = serde_json::to_vec(&object).unwrap();
        let packed = pack(&object).unwrap();
        assert!(
            packed.len() < json.len(),
            "{} vs {}",
            packed.len(),
            json.len()
        );
        assert_eq!(unpack(b"not deflate"), None);
    }
}
