//! The summary kept of the children nothing reads but an apply's comparison (ConfigMaps,
//! Services, accounts, Roles, bindings, disruption budgets, NetworkPolicies): each object's
//! deflated JSON. At a thousand clusters these kinds held ~16 MiB as reflector objects, ~1.8 KB
//! per object even with the JSON packed into an annotation. The comparison unpacks the JSON on
//! demand ([`PackedStore::get`]), so "already applied?" is still decided on what the server
//! holds.

use kube::Resource;
use serde::Serialize;
use serde_json::Value;

use super::summaries::{Summary, SummaryStore, SummaryWriter, summary_store};

/// Deflate level: a few thousand small objects at start, one per change after; the ratio is
/// worth the CPU.
const LEVEL: u8 = 6;

/// More than any object the server accepts (objects are capped at ~1.5 MB).
const UNPACKED_LIMIT: usize = 4 << 20;

/// An object's JSON, deflated.
#[derive(PartialEq)]
pub struct Packed(Box<[u8]>);

impl<K: Resource + Serialize> Summary<K> for Packed {
    fn of(object: &K) -> Option<Self> {
        pack(object).map(Packed)
    }
}

/// Each object as its packed JSON.
pub type PackedStore<K> = SummaryStore<K, Packed>;

/// An empty [`PackedStore`] and the writer that fills it.
pub fn packed_store<K>() -> (PackedStore<K>, SummaryWriter<K, Packed>) {
    summary_store()
}

impl<K> PackedStore<K> {
    /// The JSON of `name` in `namespace` as the server last sent it (without the server's
    /// bookkeeping and status, which no apply sets), if the watch has seen it. An entry that
    /// cannot be unpacked (never: only [`pack`] writes them) reads as `Null`, which compares as
    /// different, so the apply is sent.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Value> {
        self.with(namespace, name, |packed| {
            unpack(&packed.0).unwrap_or(Value::Null)
        })
    }
}

/// The object's JSON without what no apply sets (the server's bookkeeping and the status),
/// deflated. `None` if it does not serialize (it always does: it was just deserialized).
pub(super) fn pack<K: Serialize>(object: &K) -> Option<Box<[u8]>> {
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

pub(super) fn unpack(packed: &[u8]) -> Option<Value> {
    let text = miniz_oxide::inflate::decompress_to_vec_with_limit(packed, UNPACKED_LIMIT).ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Service;
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
