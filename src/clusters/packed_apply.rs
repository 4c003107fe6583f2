//! Applying a child kept in a packed cache (`PackedStore`): sent only when the cache shows it
//! differs, and deleted (by name) when the cluster no longer wants an optional one. Shared by
//! the children's apply step and the pooler's.

use std::fmt::Debug;

use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::runtime::apply::{Change, Written, apply_json, delete};
use crate::runtime::packed::PackedStore;

/// The API of kind `K` in namespace `ns`.
pub fn api<K>(client: &kube::Client, ns: &str) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    Api::namespaced(client.clone(), ns)
}

/// Applies `desired` against its packed copy; returns the write, if it made one.
pub async fn apply_packed<K>(
    api: Api<K>,
    cache: &PackedStore<K>,
    namespace: &str,
    desired: K,
) -> Result<Option<Written>>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
{
    let cached = cache.get(namespace, &desired.name_any());
    let change = apply_json(&api, cached, &desired).await?;
    Ok(Written::of(&desired, change))
}

/// Applies an optional child kept in a packed cache, or deletes it (by `name`) when the cluster
/// no longer wants it: the disruption budget back at one instance, the NetworkPolicy once
/// `spec.networkPolicy` is removed. Returns the write, if it made one.
pub async fn apply_optional<K>(
    ns: &str,
    name: String,
    desired: Option<K>,
    api: Api<K>,
    cache: &PackedStore<K>,
) -> Result<Option<Written>>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
{
    match desired {
        Some(object) => apply_packed(api, cache, ns, object).await,
        None if cache.get(ns, &name).is_some() => {
            delete(&api, &name).await?;
            Ok(Written::named::<K>(
                Some(ns.to_owned()),
                name,
                Change::Deleted,
            ))
        }
        None => Ok(None),
    }
}
