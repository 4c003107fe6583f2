//! The apply step for `spec.pooler`: its identity first (the pods ask for it), then the
//! Service and the Deployment. The pooler's certificate is issued with the server's
//! (`credentials`). Removing `spec.pooler` (or its `readOnly`) deletes the Deployment(s); the
//! Service (which then
//! selects no pod), the certificate Secret and the identity stay until the cluster is deleted,
//! as the operator deletes no Service, Secret or Role.

use super::desired::Pooler;
use super::packed_apply::{api, apply_optional, apply_packed};
use crate::error::Result;
use crate::resources::Cluster;
use crate::runtime::Context;
use crate::runtime::apply::Written;

/// Applies the pooler's children, or deletes its Deployment once `spec.pooler` is gone.
pub async fn apply_pooler(
    cluster: &Cluster<'_>,
    desired: Option<Pooler>,
    ctx: &Context,
) -> Result<Vec<Written>> {
    let (ns, client, caches) = (cluster.namespace, &ctx.client, &ctx.caches);
    let (read_only, rest) = match desired {
        Some(mut pooler) => (pooler.read_only.take(), Some(pooler)),
        None => (None, None),
    };
    let (ro_service, ro_deployment) = read_only.unzip();
    let mut written: Vec<Written> = match ro_service {
        Some(service) => apply_packed(api(client, ns), &caches.services, ns, service)
            .await?
            .into_iter()
            .collect(),
        None => Vec::new(),
    };
    let ro = apply_optional(
        ns,
        cluster.pooler_ro_name(),
        ro_deployment,
        api(client, ns),
        &caches.deployments,
    );
    written.extend(ro.await?);
    let Some(pooler) = rest else {
        let deleted = apply_optional(
            ns,
            cluster.pooler_name(),
            None::<k8s_openapi::api::apps::v1::Deployment>,
            api(client, ns),
            &caches.deployments,
        )
        .await?;
        written.extend(deleted);
        return Ok(written);
    };
    let (account, role, service) = futures::try_join!(
        apply_packed(
            api(client, ns),
            &caches.service_accounts,
            ns,
            pooler.service_account
        ),
        apply_packed(api(client, ns), &caches.roles, ns, pooler.role),
        apply_packed(api(client, ns), &caches.services, ns, pooler.service),
    )?;
    // The binding after its Role: the API server refuses to bind a Role it cannot find yet.
    let binding = apply_packed(
        api(client, ns),
        &caches.role_bindings,
        ns,
        pooler.role_binding,
    );
    let binding = binding.await?;
    let deployment = apply_packed(api(client, ns), &caches.deployments, ns, pooler.deployment);
    let deployment = deployment.await?;
    written.extend(
        [account, role, service, binding, deployment]
            .into_iter()
            .flatten(),
    );
    Ok(written)
}
