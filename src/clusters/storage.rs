//! The storage step: when `spec.storage.size` grew, each instance's claim is expanded (see
//! `resources::storage` for why the StatefulSet's template is left as created).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;

use crate::crd::conditions::STORAGE_RESIZED;
use crate::error::{Error, Result};
use crate::resources::Cluster;
use crate::resources::storage::{
    ClaimState, claim_names, claim_patch, claim_state, quantity_bytes, wants_growth,
};
use crate::runtime::Context;
use crate::runtime::apply::Written;
use crate::runtime::apply::{Change, merge_patch};
use crate::runtime::conditions::Update;

/// Reason of the False `StorageResized` condition when the class forbids expansion.
pub const EXPANSION_NOT_SUPPORTED: &str = "ExpansionNotSupported";

/// Where a requested growth of the volumes stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageProgress {
    Resized { size: String },
    Resizing { message: String },
    NotExpandable { message: String },
}

impl StorageProgress {
    /// The `StorageResized` condition.
    pub fn condition(&self) -> Update<'static> {
        let (status, reason, message) = match self {
            Self::Resized { size } => (true, "Resized", format!("every volume has {size}")),
            Self::Resizing { message } => (false, "Resizing", message.clone()),
            Self::NotExpandable { message } => (false, EXPANSION_NOT_SUPPORTED, message.clone()),
        };
        Update {
            type_: STORAGE_RESIZED,
            status,
            reason,
            message,
        }
    }
}

/// Expands the claims of `cluster` when its size grew beyond what `statefulset` was created
/// with. Sends no request at all when the size did not grow.
pub async fn expand_claims(
    cluster: &Cluster<'_>,
    statefulset: &StatefulSet,
    ctx: &Context,
) -> Result<(Option<StorageProgress>, Vec<Written>)> {
    let size = &cluster.spec.storage.size;
    let wanted = quantity_bytes(size);
    let (true, Some(wanted)) = (wants_growth(cluster, statefulset), wanted) else {
        return Ok((None, Vec::new()));
    };
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let (mut writes, mut pending) = (Vec::new(), Vec::new());
    for name in claim_names(cluster) {
        let read = |source| Error::Read {
            kind: "PersistentVolumeClaim".into(),
            name: name.clone(),
            source,
        };
        let Some(claim) = claims.get_opt(&name).await.map_err(read)? else {
            // Its pod has not started yet: the StatefulSet creates it at the new size.
            continue;
        };
        match claim_state(&claim, wanted) {
            ClaimState::Grown => {}
            ClaimState::Resizing => pending.push(name),
            ClaimState::TooSmall => {
                let class = claim
                    .spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.clone());
                if let Some(refusal) = expansion_refused(ctx, &name, class.as_deref()).await? {
                    let message =
                        format!("{refusal}, so spec.storage.size {size} cannot take effect");
                    return Ok((Some(StorageProgress::NotExpandable { message }), writes));
                }
                merge_patch(&claims, &name, &claim_patch(size)).await?;
                writes.extend(Written::of(&claim, Change::Updated));
                pending.push(name);
            }
        }
    }
    let progress = if pending.is_empty() {
        StorageProgress::Resized { size: size.clone() }
    } else {
        let message = format!("expanding {} to {size}", pending.join(", "));
        StorageProgress::Resizing { message }
    };
    Ok((Some(progress), writes))
}

/// Why claim `name` of StorageClass `class` cannot be expanded, if it cannot.
async fn expansion_refused(
    ctx: &Context,
    name: &str,
    class: Option<&str>,
) -> Result<Option<String>> {
    let Some(class) = class.filter(|c| !c.is_empty()) else {
        return Ok(Some(format!(
            "claim {name} has no StorageClass to expand it"
        )));
    };
    let classes: Api<StorageClass> = Api::all(ctx.client.clone());
    let read = |source| Error::Read {
        kind: "StorageClass".into(),
        name: class.to_owned(),
        source,
    };
    let allowed = match classes.get_opt(class).await.map_err(read)? {
        Some(found) => found.allow_volume_expansion == Some(true),
        None => false,
    };
    Ok((!allowed).then(|| {
        format!("StorageClass {class} of claim {name} does not allow volume expansion (allowVolumeExpansion is not true)")
    }))
}
