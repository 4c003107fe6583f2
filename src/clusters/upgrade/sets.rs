//! The instance sets' objects an upgrade creates and removes beyond the StatefulSet the
//! children step applies (`desired.incoming`): the new set's Lease, the old set's Lease
//! emptied at the switch (its primary fences, the next set named on it), and a set removed — scaled to zero while kept,
//! deleted with its claims and Lease when it goes.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
use kube::ResourceExt;
use kube::api::Api;

use crate::clusters::ha::lease;
use crate::clusters::packed_apply::api;
use crate::error::{Error, Result};
use crate::resources::storage::claim_names;
use crate::resources::{Cluster, UPGRADE_SWITCHED_TO_ANNOTATION};
use crate::runtime::Context;
use crate::runtime::apply::{delete, merge_patch};

/// The set's Lease, held by its ordinal 0 (created once: a Lease the set's primary renews is
/// left alone); returns its holder.
pub async fn ensure_lease(set: &Cluster<'_>, ctx: &Context) -> Result<Option<String>> {
    let leases: Api<Lease> = api(&ctx.client, set.namespace);
    let (lease, _) = lease::ensure(&leases, set).await?;
    Ok(lease::holder(&lease))
}

/// The database system identifier the set's first primary recorded on its Lease.
pub async fn system_identifier(set: &Cluster<'_>, ctx: &Context) -> Result<Option<String>> {
    let leases: Api<Lease> = api(&ctx.client, set.namespace);
    let read = lease::read(&leases, &set.lease_name()).await?;
    Ok(lease::system_identifier(&read))
}

/// The set's Lease given `system` as its database system (an in-place upgrade made a new one):
/// its holder refuses data of any other system. Retried on a conflict with a renewal.
pub async fn record_system(set: &Cluster<'_>, system: &str, ctx: &Context) -> Result<()> {
    let leases: Api<Lease> = api(&ctx.client, set.namespace);
    let name = set.lease_name();
    for _ in 0..5 {
        let mut read = lease::read(&leases, &name).await?;
        if lease::system_identifier(&read).as_deref() == Some(system) {
            return Ok(());
        }
        read.annotations_mut().insert(
            tusk_contract::lease::SYSTEM_IDENTIFIER.to_owned(),
            system.to_owned(),
        );
        if lease::replace(&leases, &name, &read).await? {
            return Ok(());
        }
    }
    Err(Error::Invariant(format!(
        "Lease {name}: five conflicting writes while recording the upgraded system; retrying"
    )))
}

/// [`system_identifier`], or none when the set has no Lease (yet, or any more).
pub async fn system_identifier_if_any(set: &Cluster<'_>, ctx: &Context) -> Result<Option<String>> {
    let leases: Api<Lease> = api(&ctx.client, set.namespace);
    let read = leases
        .get_opt(&set.lease_name())
        .await
        .map_err(|source| Error::Read {
            kind: "Lease".to_owned(),
            name: set.lease_name(),
            source,
        })?;
    Ok(read.as_ref().and_then(lease::system_identifier))
}

/// The set's Lease emptied: its holder stops renewing and fences (no holder, no primary), so
/// no write lands on the old major once the new one takes them. The same write names the set
/// that serves next ([`UPGRADE_SWITCHED_TO_ANNOTATION`]), which keeps the HA step from handing
/// the emptied Lease on and lets a later reconcile finish a switch whose status write was lost.
/// Retried on a conflict with a renewal.
pub async fn fence_for_switch(set: &Cluster<'_>, serving_next: &str, ctx: &Context) -> Result<()> {
    let leases: Api<Lease> = api(&ctx.client, set.namespace);
    let name = set.lease_name();
    for _ in 0..5 {
        let mut read = lease::read(&leases, &name).await?;
        if lease::holder(&read).is_none()
            && lease::switched_to(&read).as_deref() == Some(serving_next)
        {
            return Ok(());
        }
        read.spec.get_or_insert_default().holder_identity = None;
        read.annotations_mut().insert(
            UPGRADE_SWITCHED_TO_ANNOTATION.to_owned(),
            serving_next.to_owned(),
        );
        if lease::replace(&leases, &name, &read).await? {
            return Ok(());
        }
    }
    Err(Error::Invariant(format!(
        "Lease {name}: five conflicting writes while emptying it for the upgrade's switch; \
         retrying"
    )))
}

/// Whether the set's Lease was emptied for a switch to `serving_next` ([`fence_for_switch`]).
pub async fn fenced_for(set: &Cluster<'_>, serving_next: &str, ctx: &Context) -> Result<bool> {
    let leases: Api<Lease> = api(&ctx.client, set.namespace);
    let read = lease::read(&leases, &set.lease_name()).await?;
    Ok(
        lease::holder(&read).is_none()
            && lease::switched_to(&read).as_deref() == Some(serving_next),
    )
}

/// The set's StatefulSet scaled to zero: its pods stop, its claims stay.
pub async fn scale_to_zero(set: &Cluster<'_>, ctx: &Context) -> Result<bool> {
    let name = set.statefulset_name();
    let current = ctx.caches.statefulsets.object(set.namespace, &name);
    if current.is_none_or(|s| s.spec.replicas == Some(0)) {
        return Ok(false);
    }
    let statefulsets: Api<StatefulSet> = api(&ctx.client, set.namespace);
    let patch = serde_json::json!({ "spec": { "replicas": 0 } });
    merge_patch(&statefulsets, &name, &patch).await?;
    Ok(true)
}

/// The set removed: its StatefulSet (its pods with it), its ConfigMap, its claims and its
/// Lease.
pub async fn remove(set: &Cluster<'_>, ctx: &Context) -> Result<()> {
    let statefulsets: Api<StatefulSet> = api(&ctx.client, set.namespace);
    delete(&statefulsets, &set.statefulset_name()).await?;
    let config_maps: Api<ConfigMap> = api(&ctx.client, set.namespace);
    delete(&config_maps, &set.config_map_name()).await?;
    let claims: Api<PersistentVolumeClaim> = api(&ctx.client, set.namespace);
    for claim in claim_names(set) {
        delete(&claims, &claim).await?;
    }
    let leases: Api<Lease> = api(&ctx.client, set.namespace);
    delete(&leases, &set.lease_name()).await
}
