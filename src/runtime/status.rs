//! Status writes: server-side apply of the whole status with the one field manager, sent only
//! when it differs from what the object already has.

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{Timestamp, Unit};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::apply::FIELD_MANAGER;
use crate::error::{Error, Result};

/// The current time as the API server stores it: `metav1.Time` has second precision on the
/// wire, so a status computed with sub-second times would never compare equal to its echo.
pub fn now() -> Time {
    let now = Timestamp::now();
    Time(now.round(Unit::Second).unwrap_or(now))
}

/// Applies `status` to `object` unless `current` already equals it; returns whether it wrote.
pub async fn write<K, S>(
    client: &Client,
    object: &K,
    current: Option<&S>,
    status: &S,
) -> Result<bool>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(false);
    }
    let name = object.name_any();
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| Error::Status { name, source })?;
    Ok(true)
}
