//! The apply step: server-side apply with one field manager, skipped when the cached object
//! already holds every field we would set, so a steady-state reconcile writes nothing.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::compact;
use crate::error::{Error, Result};

/// The single field manager of every object Tusk writes.
pub const FIELD_MANAGER: &str = "tusk-operator";

/// What applying an object did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The cached object already matched; no request was sent.
    Unchanged,
    Created,
    Updated,
    /// Only from deletions (see [`delete`]); applying never deletes.
    Deleted,
}

impl Change {
    /// The verb of an Event reason or a metric label: `Created`, `Updated`, `Deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unchanged => "Unchanged",
            Self::Created => "Created",
            Self::Updated => "Updated",
            Self::Deleted => "Deleted",
        }
    }
}

/// One write the reconcile made, for Events and metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    pub reference: ObjectReference,
    pub change: Change,
}

impl Written {
    /// A write of `object`; `None` when nothing changed. The reference names the object only
    /// (no uid or version), as the `related` object of its Event.
    pub fn of<K: Resource<DynamicType = ()>>(object: &K, change: Change) -> Option<Self> {
        Self::named::<K>(object.namespace(), object.name_any(), change)
    }

    /// A write of the `K` named `name` in `namespace`; `None` when nothing changed.
    pub fn named<K: Resource<DynamicType = ()>>(
        namespace: Option<String>,
        name: String,
        change: Change,
    ) -> Option<Self> {
        (change != Change::Unchanged).then(|| Self {
            reference: ObjectReference {
                api_version: Some(K::api_version(&()).into_owned()),
                kind: Some(K::kind(&()).into_owned()),
                name: Some(name),
                namespace,
                ..ObjectReference::default()
            },
            change,
        })
    }

    /// The written object's kind.
    pub fn kind(&self) -> &str {
        self.reference.kind.as_deref().unwrap_or_default()
    }

    /// The written object's name.
    pub fn name(&self) -> &str {
        self.reference.name.as_deref().unwrap_or_default()
    }
}

/// An applied object as the API server holds it now, and what applying it changed.
#[derive(Clone, Debug)]
pub struct Applied<K> {
    pub object: Arc<K>,
    pub change: Change,
}

/// Applies `desired` unless `cached` already contains it.
pub async fn apply<K>(api: &Api<K>, cached: Option<Arc<K>>, desired: K) -> Result<Applied<K>>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let name = desired.name_any();
    let serialize = |source| Error::Serialize {
        kind: kind.clone(),
        name: name.clone(),
        source,
    };
    let wanted = serde_json::to_value(&desired).map_err(serialize)?;
    if let Some(cached) = cached {
        let mut actual = serde_json::to_value(cached.as_ref()).map_err(serialize)?;
        compact::restore(&kind, &mut actual);
        if already_applied(&kind, &actual, &wanted) {
            return Ok(Applied {
                object: cached,
                change: Change::Unchanged,
            });
        }
        let object = patch(api, &name, &desired, &kind).await?;
        return Ok(Applied {
            object: Arc::new(object),
            change: Change::Updated,
        });
    }
    let object = patch(api, &name, &desired, &kind).await?;
    Ok(Applied {
        object: Arc::new(object),
        change: Change::Created,
    })
}

/// Applies `desired` unless `cached`, the JSON of the object as the server last sent it (a
/// [`PackedStore`](super::packed::PackedStore) entry), already contains it.
pub async fn apply_json<K>(api: &Api<K>, cached: Option<Value>, desired: &K) -> Result<Change>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let name = desired.name_any();
    let Some(actual) = cached else {
        patch(api, &name, desired, &kind).await?;
        return Ok(Change::Created);
    };
    let wanted = serde_json::to_value(desired).map_err(|source| Error::Serialize {
        kind: kind.clone(),
        name: name.clone(),
        source,
    })?;
    if already_applied(&kind, &actual, &wanted) {
        return Ok(Change::Unchanged);
    }
    patch(api, &name, desired, &kind).await?;
    Ok(Change::Updated)
}

/// Whether `actual`, an object's JSON as the server holds it, already has every field of
/// `wanted`: then applying it would change nothing and is not sent.
fn already_applied(kind: &str, actual: &Value, wanted: &Value) -> bool {
    contains(actual, wanted) && atomic_fields_equal(kind, actual, wanted)
}

async fn patch<K>(api: &Api<K>, name: &str, desired: &K, kind: &str) -> Result<K>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(desired))
        .await
        .map_err(|source| Error::Apply {
            kind: kind.to_owned(),
            name: name.to_owned(),
            source,
        })
}

/// Creates `object` once, for objects that are never rewritten (credentials, Jobs, Backups).
/// Returns `Created`, or `Unchanged` when it already exists (a concurrent reconcile won).
pub async fn create<K>(api: &Api<K>, object: &K) -> Result<Change>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    K::DynamicType: Default,
{
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, object).await {
        Ok(_) => Ok(Change::Created),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Change::Unchanged),
        Err(source) => Err(Error::Apply {
            kind: K::kind(&K::DynamicType::default()).to_string(),
            name: object.name_any(),
            source,
        }),
    }
}

/// Deletes `name` in the background; an object already gone is not an error.
pub async fn delete<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Delete {
            kind: K::kind(&K::DynamicType::default()).to_string(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// The result of a write to `kind` `name` that finds the object gone: not an error (`None`)
/// where there is nothing left to write to (a pod deleted meanwhile, a Job its history limit
/// removed); any other failure is `Error::Apply`.
#[expect(
    clippy::result_large_err,
    reason = "the error every reconcile step returns; the async steps return it unboxed too"
)]
pub fn unless_gone<T>(result: Result<T, kube::Error>, kind: &str, name: &str) -> Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(source) => Err(Error::Apply {
            kind: kind.to_owned(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// Merge-patches `name` with `patch` as the one field manager: for the few fields Tusk sets on
/// objects it does not apply whole (a claim's requested size, a Backup's verify request).
pub async fn merge_patch<K>(api: &Api<K>, name: &str, patch: &Value) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    api.patch(name, &patch_params(), &Patch::Merge(patch))
        .await
        .map_err(|source| Error::Apply {
            kind: K::kind(&K::DynamicType::default()).to_string(),
            name: name.to_owned(),
            source,
        })
}

/// Patch parameters for the non-apply patches (finalizers, a Job's annotation).
pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Whether `actual` holds every field of `wanted` with the same value. Fields only in `actual`
/// (server defaults, other managers' fields, status) are ignored; a wanted zero value (null,
/// `""`, `false`, `0`, empty list or map) matches a missing one, since the API server drops
/// those (Go's `omitempty`).
pub fn contains(actual: &Value, wanted: &Value) -> bool {
    match (actual, wanted) {
        (_, Value::Null) => true,
        (Value::Object(actual), Value::Object(wanted)) => wanted.iter().all(|(key, w)| {
            actual
                .get(key)
                .map_or_else(|| is_empty(w), |a| contains(a, w))
        }),
        (Value::Array(actual), Value::Array(wanted)) => {
            actual.len() == wanted.len() && actual.iter().zip(wanted).all(|(a, w)| contains(a, w))
        }
        (Value::Null, wanted) => is_empty(wanted),
        (actual, wanted) => actual == wanted,
    }
}

/// Fields the API server treats as one value (`x-kubernetes-map-type: atomic`): a key added by
/// someone else is drift there too, and applying our value replaces the whole map.
fn atomic_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        // A Service whose selector gained a key selects no pod while looking converged.
        "Service" => &["/spec/selector"],
        _ => &[],
    }
}

/// Whether every atomic field of `kind` is exactly as wanted, not merely a superset.
pub fn atomic_fields_equal(kind: &str, actual: &Value, wanted: &Value) -> bool {
    atomic_fields(kind)
        .iter()
        .all(|path| match (actual.pointer(path), wanted.pointer(path)) {
            (Some(a), Some(w)) => a == w,
            (a, w) => a.is_none_or(is_empty) && w.is_none_or(is_empty),
        })
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_empty),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_defaults_and_foreign_fields_do_not_count_as_drift() {
        let actual = json!({
            "metadata": {"name": "x", "resourceVersion": "7", "labels": {"a": "1", "added-by-user": "y"}},
            "spec": {"ports": [{"port": 5432, "protocol": "TCP", "targetPort": 5432}], "clusterIP": "10.0.0.1"},
            "status": {"loadBalancer": {}}
        });
        let wanted = json!({
            "metadata": {"name": "x", "labels": {"a": "1"}},
            "spec": {"ports": [{"port": 5432}], "selector": null, "extra": []},
            "env": {"value": "", "optional": false, "count": 0}
        });
        assert!(contains(&actual, &wanted));
    }

    #[test]
    fn a_key_added_to_an_atomic_map_is_drift() {
        let wanted = json!({"spec": {"selector": {"app": "db"}}});
        let added = json!({"spec": {"selector": {"app": "db", "extra": "yes"}}});
        assert!(
            contains(&added, &wanted),
            "a superset for the generic compare"
        );
        assert!(!atomic_fields_equal("Service", &added, &wanted));
        assert!(atomic_fields_equal("Service", &wanted, &wanted));
        assert!(atomic_fields_equal("ConfigMap", &added, &wanted));
    }

    #[test]
    fn changed_missing_or_reordered_values_are_drift() {
        let actual = json!({"spec": {"image": "postgres:17", "args": ["-c", "a"]}});
        assert!(!contains(
            &actual,
            &json!({"spec": {"image": "postgres:18"}})
        ));
        assert!(!contains(&actual, &json!({"spec": {"command": ["x"]}})));
        assert!(!contains(&actual, &json!({"spec": {"args": ["a", "-c"]}})));
        assert!(!contains(&actual, &json!({"spec": {"args": ["-c"]}})));
    }
}
