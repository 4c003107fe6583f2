//! Status writes: server-side apply of the whole status with the one field manager, sent only
//! when it differs from what the object already has, and only onto the copy it was computed
//! from.

use std::time::Duration;

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

/// How soon a reconcile whose status write was refused as stale runs again: the cache trails
/// the API server by one watch event, milliseconds.
pub const STALE_COPY_RETRY: Duration = Duration::from_millis(200);

/// The current time as the API server stores it: `metav1.Time` has second precision on the
/// wire, so a status computed with sub-second times would never compare equal to its echo.
pub fn now() -> Time {
    let now = Timestamp::now();
    Time(now.round(Unit::Second).unwrap_or(now))
}

/// Applies `status` to `object` unless `current` already equals it; returns the object as
/// written, when it wrote.
///
/// The patch carries `object`'s resourceVersion, so the API server refuses it (409 Conflict,
/// `Error::is_stale_copy`) when the object changed since it was read. A reconcile can start
/// from a cached copy that predates the previous reconcile's own status write; applying the
/// whole status computed from it would silently remove what that write added (a
/// `lastFailover`, a condition), since one field manager owns every field.
pub async fn write<K, S>(
    client: &Client,
    object: &K,
    current: Option<&S>,
    status: &S,
) -> Result<Option<K>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(None);
    }
    let name = object.name_any();
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    let mut patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    if let Some(version) = &object.meta().resource_version {
        patch["metadata"] = json!({ "resourceVersion": version });
    }
    let written = api
        .patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|source| Error::Status { name, source })?;
    Ok(Some(written))
}
