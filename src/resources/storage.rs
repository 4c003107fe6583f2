//! Growing a cluster's volumes. A StatefulSet's `volumeClaimTemplates` are immutable, so the
//! template stays as it was created and each existing claim is expanded instead (the way
//! `kubectl patch pvc` would). Recreating the StatefulSet with orphaned pods would also update
//! the template, but it deletes and re-adopts the object that owns the running database, for
//! a template that is only read when a new instance is added — and instances are fixed at 1.
//! Shrinking and class changes are refused at `kubectl apply` (CEL rules on `spec.storage`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

use super::Cluster;
use super::statefulset::claim_retention;

/// Name of the volume claim template, and the prefix of every claim.
pub const DATA_CLAIM: &str = "data";

/// The bytes a storage quantity stands for (`10Gi`, `500M`, `1.5Ti`, `1e9`); `None` for what is
/// not a quantity. Rounded down: only comparisons of sizes are made with it.
pub fn quantity_bytes(quantity: &str) -> Option<u128> {
    let text = quantity.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 10u128.pow(3),
        "M" => 10u128.pow(6),
        "G" => 10u128.pow(9),
        "T" => 10u128.pow(12),
        "P" => 10u128.pow(15),
        "E" => 10u128.pow(18),
        exponent => 10u128.checked_pow(exponent.strip_prefix(['e', 'E'])?.parse().ok()?)?,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let scale = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let bytes = whole.checked_mul(multiplier)?;
    bytes.checked_add(fraction.checked_mul(multiplier)? / scale)
}

/// The data claim template of a StatefulSet.
fn data_claim(statefulset: &StatefulSet) -> Option<&PersistentVolumeClaim> {
    let templates = statefulset.spec.volume_claim_templates.as_ref()?;
    templates
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(DATA_CLAIM))
}

/// The spec of the data claim template of a StatefulSet.
fn data_template(statefulset: &StatefulSet) -> Option<&PersistentVolumeClaimSpec> {
    data_claim(statefulset)?.spec.as_ref()
}

/// The storage request of a claim spec.
fn requested(spec: &PersistentVolumeClaimSpec) -> Option<&Quantity> {
    spec.resources.as_ref()?.requests.as_ref()?.get("storage")
}

/// Keeps the claim template of `existing` in `desired`: the API server refuses any change to
/// it, and a refused StatefulSet would stop every other change (image, configuration) too.
/// A StatefulSet created before its claims carried the PostgreSQL's owner reference keeps
/// `whenDeleted: Delete`, so that its claims still go with the cluster.
pub fn keep_claim_template(desired: &mut StatefulSet, existing: &StatefulSet) {
    let Some(created) = data_claim(existing) else {
        return;
    };
    let created_owners = created.metadata.owner_references.clone();
    let (created_size, created_class) = match created.spec.as_ref() {
        Some(spec) => (requested(spec).cloned(), spec.storage_class_name.clone()),
        None => (None, None),
    };
    desired.spec.persistent_volume_claim_retention_policy =
        Some(claim_retention(created_owners.is_some()));
    let templates = desired.spec.volume_claim_templates.as_mut();
    let Some(data) = templates.and_then(|ts| {
        ts.iter_mut()
            .find(|t| t.metadata.name.as_deref() == Some(DATA_CLAIM))
    }) else {
        return;
    };
    data.metadata.owner_references = created_owners;
    let Some(spec) = data.spec.as_mut() else {
        return;
    };
    spec.storage_class_name = created_class;
    if let (Some(size), Some(resources)) = (created_size, spec.resources.as_mut()) {
        resources.requests = Some(BTreeMap::from([("storage".to_owned(), size)]));
    }
}

/// Whether `spec.storage.size` is larger than the size `statefulset` was created with, so that
/// its claims need expanding; `false` (nothing to do, no request sent) otherwise.
pub fn wants_growth(cluster: &Cluster, statefulset: &StatefulSet) -> bool {
    let created = data_template(statefulset).and_then(requested);
    match (
        created.and_then(|q| quantity_bytes(&q.0)),
        quantity_bytes(&cluster.spec.storage.size),
    ) {
        (Some(created), Some(wanted)) => wanted > created,
        _ => false,
    }
}

/// The claims of every instance: `data-<statefulset>-<ordinal>`.
pub fn claim_names(cluster: &Cluster) -> Vec<String> {
    (0..cluster.spec.instances.max(0))
        .map(|i| format!("{DATA_CLAIM}-{}-{i}", cluster.statefulset_name()))
        .collect()
}

/// Where one claim stands against the wanted size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimState {
    /// Its capacity has reached the wanted size.
    Grown,
    /// Asked for the wanted size; the volume or the filesystem is being resized.
    Resizing,
    /// Still asks for less: needs the patch from [`claim_patch`].
    TooSmall,
}

/// Compares a claim with the wanted size in bytes.
pub fn claim_state(claim: &PersistentVolumeClaim, wanted: u128) -> ClaimState {
    let bytes = |q: Option<&Quantity>| q.and_then(|q| quantity_bytes(&q.0)).unwrap_or(0);
    let request = bytes(claim.spec.as_ref().and_then(requested));
    let capacity = claim.status.as_ref().and_then(|s| s.capacity.as_ref());
    if bytes(capacity.and_then(|c| c.get("storage"))) >= wanted {
        ClaimState::Grown
    } else if request >= wanted {
        ClaimState::Resizing
    } else {
        ClaimState::TooSmall
    }
}

/// The merge patch that asks a claim for `size`; the storage driver does the rest.
pub fn claim_patch(size: &str) -> Value {
    json!({"spec": {"resources": {"requests": {"storage": size}}}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;
    use crate::resources::statefulset;
    use k8s_openapi::api::apps::v1::StatefulSetPersistentVolumeClaimRetentionPolicy;

    #[test]
    fn quantities_in_bytes() {
        assert_eq!(quantity_bytes("1Gi"), Some(1 << 30));
        assert_eq!(quantity_bytes("1024Mi"), quantity_bytes("1Gi"));
        assert_eq!(quantity_bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(quantity_bytes("500M"), Some(500_000_000));
        assert_eq!(quantity_bytes("1e9"), Some(1_000_000_000));
        assert_eq!(quantity_bytes("123"), Some(123));
        for bad in ["", "lots", "1Zi", "Gi", "1.2.3Gi"] {
            assert_eq!(quantity_bytes(bad), None, "{bad}");
        }
    }

    fn built(spec: &str) -> (crate::crd::PostgreSQL, StatefulSet) {
        let pg = postgresql(spec);
        let agent = crate::resources::AgentSettings {
            image: "agent".into(),
        };
        let sts = statefulset(&Cluster::new(&pg).unwrap(), "checksum", &agent);
        (pg, sts)
    }

    #[test]
    fn the_claim_template_stays_as_created_when_the_size_grows() {
        let (_, created) = built("storage: {size: 1Gi, storageClassName: fast}");
        let (pg, mut desired) = built("storage: {size: 5Gi, storageClassName: fast}");
        assert!(wants_growth(&Cluster::new(&pg).unwrap(), &created));
        keep_claim_template(&mut desired, &created);
        assert_eq!(
            desired, created,
            "only the size differed, so nothing differs now"
        );
        assert!(!wants_growth(
            &Cluster::new(&pg).unwrap(),
            &built("storage: {size: 5Gi}").1
        ));
    }

    #[test]
    fn claims_belong_to_the_postgresql_and_an_older_statefulset_keeps_taking_its_own() {
        let (pg, built) = built(MINIMAL);
        let template = &built.spec.volume_claim_templates.as_ref().unwrap()[0];
        let owners = template.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].uid, pg.metadata.uid.clone().unwrap());
        assert_eq!(
            (owners[0].controller, owners[0].block_owner_deletion),
            (None, None)
        );
        let policy = built.spec.persistent_volume_claim_retention_policy.as_ref();
        let when = |p: Option<&StatefulSetPersistentVolumeClaimRetentionPolicy>| {
            let p = p.unwrap();
            (
                p.when_deleted.clone().unwrap(),
                p.when_scaled.clone().unwrap(),
            )
        };
        assert_eq!(
            when(policy),
            ("Retain".into(), "Retain".into()),
            "a StatefulSet deleted by hand leaves the data"
        );

        // Created before claims carried the owner reference: its template cannot change, so
        // its claims still go with the StatefulSet, and so with the PostgreSQL.
        let mut older = built.clone();
        older.spec.volume_claim_templates.as_mut().unwrap()[0]
            .metadata
            .owner_references = None;
        older.spec.persistent_volume_claim_retention_policy = Some(claim_retention(false));
        let mut desired = built.clone();
        keep_claim_template(&mut desired, &older);
        assert_eq!(desired, older);
        let mut desired = older.clone();
        keep_claim_template(&mut desired, &built);
        assert_eq!(desired, built);
    }

    #[test]
    fn claims_are_compared_by_bytes() {
        let claim = |request: &str, capacity: &str| -> PersistentVolumeClaim {
            serde_json::from_value(json!({
                "metadata": {"name": "data-demo-0"},
                "spec": {"resources": {"requests": {"storage": request}}},
                "status": {"capacity": {"storage": capacity}},
            }))
            .unwrap()
        };
        let five = 5 << 30;
        assert_eq!(
            claim_state(&claim("1Gi", "1Gi"), five),
            ClaimState::TooSmall
        );
        assert_eq!(
            claim_state(&claim("5Gi", "1Gi"), five),
            ClaimState::Resizing
        );
        assert_eq!(
            claim_state(&claim("5120Mi", "5Gi"), five),
            ClaimState::Grown
        );
        let pg = postgresql(MINIMAL);
        assert_eq!(claim_names(&Cluster::new(&pg).unwrap()), ["data-demo-0"]);
        assert_eq!(
            claim_patch("5Gi"),
            json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}})
        );
    }
}
