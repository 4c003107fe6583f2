//! The primary Lease as the operator reads and writes it: created once, its members kept up to
//! date, and handed over only with the resourceVersion read, so that no write of the operator
//! ever overwrites a renewal or another handover.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use tusk_contract::lease::{RELEASE_REQUESTED, SYSTEM_IDENTIFIER};

use super::handover_record::record_on;
use super::pods::{DatabasePod, pod_ip};
use crate::crd::Failover;
use crate::error::{Error, Result};

use crate::resources::{
    Cluster, HOLDER_ADDRESS_ANNOTATION, MEMBERS_ANNOTATION, SWITCHOVER_ANNOTATION,
    SWITCHOVER_LEASE_ANNOTATIONS, UPGRADE_SWITCHED_TO_ANNOTATION, holder_address, initial_lease,
};
use crate::runtime::apply::{Change, FIELD_MANAGER, Written, create};

/// Creates the Lease (held by ordinal 0) unless it exists; returns it, and the write.
pub async fn ensure(
    leases: &Api<Lease>,
    cluster: &Cluster<'_>,
) -> Result<(Lease, Option<Written>)> {
    let lease = initial_lease(cluster, MicroTime(Timestamp::now()));
    let change = create(leases, &lease).await?;
    let written = Written::of(&lease, change);
    let lease = match change {
        Change::Created => lease,
        // Created before (by an earlier reconcile whose status write was lost).
        _ => read(leases, &cluster.lease_name()).await?,
    };
    Ok((lease, written))
}

/// Brings the Lease's member list (the primary keeps one replication slot per member) up to
/// date after `instances` changed, starting from `lease` as read; retried on a conflict with a
/// renewal. Returns the Lease as the API server holds it now.
pub async fn sync_members(
    cluster: &Cluster<'_>,
    leases: &Api<Lease>,
    lease: Option<Lease>,
) -> Result<Lease> {
    let name = cluster.lease_name();
    let members = cluster.pod_names().join(",");
    let mut read_now = lease;
    for _ in 0..3 {
        let mut lease = match read_now.take() {
            Some(lease) => lease,
            None => read(leases, &name).await?,
        };
        if lease.annotations().get(MEMBERS_ANNOTATION) == Some(&members) {
            return Ok(lease);
        }
        lease
            .annotations_mut()
            .insert(MEMBERS_ANNOTATION.to_owned(), members.clone());
        if let Some(written) = write(leases, &name, &lease).await? {
            return Ok(written);
        }
    }
    Err(Error::Invariant(format!(
        "Lease {name}: three conflicting writes while updating its members; retrying"
    )))
}

/// Writes `target` as the holder (`None`: leaves the holder as it is) with its pod's IP and the
/// `record` of the handover, with the resourceVersion read, and ends any switchover recorded on
/// the Lease: `false` when the Lease changed meanwhile.
pub async fn hand_over(
    leases: &Api<Lease>,
    mut lease: Lease,
    target: Option<&str>,
    record: Option<&Failover>,
    pods: &[DatabasePod],
    cluster: &Cluster<'_>,
) -> Result<bool> {
    let name = cluster.lease_name();
    let now = MicroTime(Timestamp::now());
    let spec = lease.spec.get_or_insert_default();
    if let Some(target) = target {
        spec.holder_identity = Some(target.to_owned());
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        // Standbys repoint to the new holder's IP at once, not after its first renew.
        let ip = pod_ip(pods, target);
        let annotations = lease.annotations_mut();
        match ip {
            Some(ip) => annotations.insert(
                HOLDER_ADDRESS_ANNOTATION.to_owned(),
                holder_address(target, &ip),
            ),
            None => annotations.remove(HOLDER_ADDRESS_ANNOTATION),
        };
    }
    if let Some(record) = record {
        record_on(&mut lease, record);
    }
    let annotations = lease.annotations_mut();
    annotations.insert(MEMBERS_ANNOTATION.to_owned(), cluster.pod_names().join(","));
    for key in SWITCHOVER_LEASE_ANNOTATIONS {
        annotations.remove(key);
    }
    // A new holder starts with a clean slate; an old one given the Lease back may renew again.
    annotations.remove(RELEASE_REQUESTED);
    replace(leases, &name, &lease).await
}

/// Asks the holder `holder` to stop renewing (and fence) so that the Lease expires and is
/// handed on: `false` when the Lease changed meanwhile.
pub async fn request_release(
    leases: &Api<Lease>,
    mut lease: Lease,
    holder: &str,
    cluster: &Cluster<'_>,
) -> Result<bool> {
    lease
        .annotations_mut()
        .insert(RELEASE_REQUESTED.to_owned(), holder.to_owned());
    replace(leases, &cluster.lease_name(), &lease).await
}

/// Writes `lease` back with the resourceVersion it was read at: `false` when it changed
/// meanwhile (a conflict), so no write ever overwrites a renewal or another handover.
pub async fn replace(leases: &Api<Lease>, name: &str, lease: &Lease) -> Result<bool> {
    Ok(write(leases, name, lease).await?.is_some())
}

/// [`replace`], returning the Lease as written (`None` on a conflict).
async fn write(leases: &Api<Lease>, name: &str, lease: &Lease) -> Result<Option<Lease>> {
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match leases.replace(name, &params, lease).await {
        Ok(written) => Ok(Some(written)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(source) => Err(Error::Apply {
            kind: "Lease".to_owned(),
            name: name.to_owned(),
            source,
        }),
    }
}

pub async fn read(leases: &Api<Lease>, name: &str) -> Result<Lease> {
    leases.get(name).await.map_err(|source| Error::Read {
        kind: "Lease".to_owned(),
        name: name.to_owned(),
        source,
    })
}

/// `holderIdentity`, unless empty.
pub fn holder(lease: &Lease) -> Option<String> {
    let holder = lease.spec.as_ref()?.holder_identity.clone()?;
    (!holder.is_empty()).then_some(holder)
}

/// How long the holder may go unrenewed before the Lease is handed on: the compiled-in
/// duration of the contract, never `leaseDurationSeconds` as read (any member may write the
/// Lease; a value of 1 would remove the holder's safety margin).
pub fn duration() -> Duration {
    Duration::from_secs(u64::from(tusk_contract::lease::DURATION_SECONDS))
}

/// The system identifier the first holder recorded.
pub fn system_identifier(lease: &Lease) -> Option<String> {
    annotation(lease, SYSTEM_IDENTIFIER)
}

/// The holder asked to release the Lease, if any.
pub fn release_requested(lease: &Lease) -> Option<String> {
    annotation(lease, RELEASE_REQUESTED)
}

/// Whether a switchover is recorded on the Lease.
pub fn switchover_recorded(lease: &Lease) -> bool {
    annotation(lease, SWITCHOVER_ANNOTATION).is_some()
}

/// The set an upgrade's switch emptied this Lease for, if it did.
pub fn switched_to(lease: &Lease) -> Option<String> {
    annotation(lease, UPGRADE_SWITCHED_TO_ANNOTATION)
}

/// The Lease's member list, as the operator last wrote it.
pub fn members(lease: &Lease) -> Vec<String> {
    annotation(lease, MEMBERS_ANNOTATION)
        .map(|list| tusk_contract::lease::members(&list))
        .unwrap_or_default()
}

fn annotation(lease: &Lease, key: &str) -> Option<String> {
    lease
        .annotations()
        .get(key)
        .filter(|v| !v.is_empty())
        .cloned()
}

/// The key of `cluster`'s Lease in the operator's `LeaseClock`.
pub fn clock_key(cluster: &Cluster<'_>) -> String {
    format!("{}/{}", cluster.namespace, cluster.lease_name())
}
