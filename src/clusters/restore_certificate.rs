//! The restore Job's superuser certificate (`resources::restore_tls`): issued just before the
//! Job is created, useless once the Job's deadline has passed. It is not deleted after: that
//! would need `delete` on Secrets, which the operator otherwise never has (the database keeps
//! its passwords); it goes with the cluster.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use crate::error::{Error, Result};
use crate::resources::ca_rotation::CaState;
use crate::resources::{Cluster, restore_tls};
use crate::runtime::Context;
use crate::runtime::apply::{Change, Written, apply};

/// Issues the certificate from the stored CA (read, not cached: the cache keeps no keys) and
/// writes its Secret, replacing one an earlier attempt left. Nothing with certificates the
/// user brings: there the restore needs `spec.superuserAccess`.
pub async fn issue(
    cluster: &Cluster<'_>,
    ctx: &Context,
    deadline_seconds: i64,
) -> Result<Option<Written>> {
    if cluster.user_server_secret().is_some() {
        return Ok(None);
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let name = cluster.ca_secret_name();
    let stored = api.get(&name).await.map_err(|source| Error::Read {
        kind: "Secret".into(),
        name: name.clone(),
        source,
    })?;
    let ca = CaState::read(&stored, &ctx.certificate_lifetimes)?;
    let now = time::OffsetDateTime::now_utc();
    let secret = restore_tls::restore_tls_secret(cluster, &ca, now, deadline_seconds)?;
    apply(&api, None, secret.clone()).await?;
    Ok(Written::of(&secret, Change::Created))
}
