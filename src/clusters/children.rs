//! The apply step for a cluster's children: the desired objects (see `desired`) are applied in
//! dependency order — credentials, configuration, Services, the StatefulSet, then the backup
//! CronJob, which depends on the StatefulSet being ready — and every write is reported.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::desired::Desired;
use super::status::{BackupSchedule, Readiness};
use super::storage::{StorageProgress, expand_claims};
use crate::error::{Error, Result};
use crate::resources::storage::keep_claim_template;
use crate::resources::{Cluster, tls};
use crate::runtime::apply::{Change, Written, apply, apply_json, create, delete};
use crate::runtime::packed::PackedStore;
use crate::runtime::{Context, cached};

/// The result of applying every child.
#[derive(Clone, Debug)]
pub struct AppliedChildren {
    pub readiness: Readiness,
    pub backup: BackupSchedule,
    /// Set once `spec.storage.size` grew beyond the size the volumes were created with.
    pub storage: Option<StorageProgress>,
    pub writes: Vec<Written>,
}

/// Applies `desired` for `cluster`. `restore_pending` holds clients (the `-rw` Service) and the
/// CronJob back while a restore has not finished.
pub async fn apply_children(
    cluster: &Cluster<'_>,
    desired: Desired,
    ctx: &Context,
    restore_pending: bool,
) -> Result<AppliedChildren> {
    let (ns, client, caches) = (cluster.namespace, ctx.client.clone(), &ctx.caches);
    let mut writes = Vec::new();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for secret in desired.secrets {
        let change = ensure_secret(&secrets, ctx, ns, &secret).await?;
        writes.extend(Written::of(&secret, change));
    }
    writes.extend(ensure_certificates(cluster, ctx, &secrets).await?);

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let config_map = desired.config_map;
    apply_packed(&api, &caches.config_maps, ns, config_map, &mut writes).await?;
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let rw = if restore_pending {
        desired.rw.held
    } else {
        desired.rw.routed
    };
    for service in std::iter::once(rw).chain(desired.services) {
        apply_packed(&api, &caches.services, ns, service, &mut writes).await?;
    }
    // The pods' account exists before the StatefulSet asks for it.
    let access = desired.access;
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let sa = access.service_account;
    apply_packed(&api, &caches.service_accounts, ns, sa, &mut writes).await?;
    let api: Api<Role> = Api::namespaced(client.clone(), ns);
    apply_packed(&api, &caches.roles, ns, access.role, &mut writes).await?;
    let api: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let binding = access.role_binding;
    apply_packed(&api, &caches.role_bindings, ns, binding, &mut writes).await?;
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let mut desired_statefulset = desired.statefulset;
    let existing = cached(&caches.statefulsets, ns, &desired_statefulset.name_any());
    if let Some(existing) = &existing {
        keep_claim_template(&mut desired_statefulset, existing);
    }
    let statefulset = apply_one(
        &api,
        &caches.statefulsets,
        ns,
        desired_statefulset,
        &mut writes,
    )
    .await?;
    apply_budget(cluster, desired.disruption_budget, ctx, &mut writes).await?;
    let (storage, claims) = expand_claims(cluster, &statefulset, ctx).await?;
    writes.extend(claims);
    let readiness = Readiness::of(Some(&statefulset), cluster.spec.instances);
    let serving = readiness.ready && !restore_pending;

    let name = cluster.cronjob_name();
    let api: Api<CronJob> = Api::namespaced(client, ns);
    let existing = cached(&caches.cronjobs, ns, &name);
    let backup = match desired.backup {
        None => {
            if let Some(existing) = existing {
                delete(&api, &name).await?;
                writes.extend(Written::of(existing.as_ref(), Change::Deleted));
            }
            BackupSchedule::NotConfigured
        }
        // Never create the CronJob before the database has been Ready once.
        Some(_) if existing.is_none() && !serving => BackupSchedule::WaitingForReady,
        Some(cronjob) => {
            let suspended_by_user = cronjob.suspended_by_user;
            let wanted = if serving {
                cronjob.serving
            } else {
                cronjob.held
            };
            let applied = apply(&api, existing, wanted).await?;
            writes.extend(Written::of(applied.object.as_ref(), applied.change));
            match (suspended_by_user, serving) {
                (true, _) => BackupSchedule::Suspended,
                (false, false) => BackupSchedule::WaitingForReady,
                (false, true) => BackupSchedule::Scheduled,
            }
        }
    };
    Ok(AppliedChildren {
        readiness,
        backup,
        storage,
        writes,
    })
}

/// Applies `desired` against its cached copy, notes the write, and returns the object as the
/// API server holds it now.
async fn apply_one<K>(
    api: &Api<K>,
    cache: &Store<K>,
    namespace: &str,
    desired: K,
    writes: &mut Vec<Written>,
) -> Result<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
{
    let cached = cached(cache, namespace, &desired.name_any());
    let applied = apply(api, cached, desired).await?;
    writes.extend(Written::of(applied.object.as_ref(), applied.change));
    Ok(applied.object)
}

/// Applies `desired` against its packed copy and notes the write.
async fn apply_packed<K>(
    api: &Api<K>,
    cache: &PackedStore<K>,
    namespace: &str,
    desired: K,
    writes: &mut Vec<Written>,
) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
{
    let cached = cache.get(namespace, &desired.name_any());
    let change = apply_json(api, cached, &desired).await?;
    writes.extend(Written::of(&desired, change));
    Ok(())
}

/// Applies the PodDisruptionBudget of a replicated cluster, or deletes it when the cluster went
/// back to one instance.
async fn apply_budget(
    cluster: &Cluster<'_>,
    desired: Option<PodDisruptionBudget>,
    ctx: &Context,
    writes: &mut Vec<Written>,
) -> Result<()> {
    let ns = cluster.namespace;
    let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), ns);
    let cache = &ctx.caches.disruption_budgets;
    match desired {
        Some(budget) => {
            apply_packed(&api, cache, ns, budget, writes).await?;
        }
        None => {
            let name = cluster.statefulset_name();
            if cache.get(ns, &name).is_some() {
                delete(&api, &name).await?;
                let written = Written::named::<PodDisruptionBudget>(
                    Some(ns.to_owned()),
                    name,
                    Change::Deleted,
                );
                writes.extend(written);
            }
        }
    }
    Ok(())
}

/// Issues the cluster's CA and its server certificate once, each in its Secret. Only what is
/// missing is made: a missing server certificate is signed by the stored CA (clients that trust
/// it keep trusting the server); a missing CA is issued anew with a server certificate it signs,
/// which replaces the old one.
async fn ensure_certificates(
    cluster: &Cluster<'_>,
    ctx: &Context,
    api: &Api<Secret>,
) -> Result<Vec<Written>> {
    let ns = cluster.namespace;
    let (ca_name, server_name) = (cluster.ca_secret_name(), cluster.server_tls_secret_name());
    let now = time::OffsetDateTime::now_utc();
    let due = |secret: &Secret| tls::server_renewal_due(secret, now);
    let cached_server = cached(&ctx.caches.secrets, ns, &server_name);
    let ca_cached = cached(&ctx.caches.secrets, ns, &ca_name).is_some();
    if ca_cached && cached_server.as_deref().is_some_and(|s| !due(s)) {
        return Ok(Vec::new());
    }
    // The cache can lag behind the API server: reads decide what is really missing.
    let read = |name: String| async move {
        api.get_opt(&name).await.map_err(|source| Error::Read {
            kind: "Secret".to_owned(),
            name,
            source,
        })
    };
    // None: no server Secret; Some(true): its certificate is due for renewal.
    let server_due = match cached_server {
        Some(secret) => Some(due(&secret)),
        None => read(server_name).await?.map(|secret| due(&secret)),
    };
    let mut writes = Vec::new();
    let ca = match read(ca_name).await? {
        Some(_) if server_due == Some(false) => return Ok(writes),
        Some(stored) => tls::stored_ca(&stored)?,
        None => {
            let ca = tls::issue_ca(cluster, now)?;
            let secret = tls::ca_secret(cluster, &ca);
            let change = create(api, &secret).await?;
            writes.extend(Written::of(&secret, change));
            if change != Change::Created {
                // Another writer stored a CA meanwhile: the next reconcile signs with it.
                return Ok(writes);
            }
            ca
        }
    };
    let server = tls::issue_server(cluster, &ctx.cluster_domain, &ca, now)?;
    let secret = tls::server_secret(cluster, &server, &ca.cert, tls::server_not_after(now));
    // A renewal (or a new CA) replaces the Secret's files in place; the instance managers
    // reload PostgreSQL when they change, no pod restarts.
    let change = if server_due.is_some() {
        apply(api, None, secret.clone()).await?;
        Change::Updated
    } else {
        create(api, &secret).await?
    };
    writes.extend(Written::of(&secret, change));
    Ok(writes)
}

/// Creates a credentials Secret once. An existing Secret, ours or one the user brought, is
/// never rewritten: the database keeps the password it was initialised with.
async fn ensure_secret(
    api: &Api<Secret>,
    ctx: &Context,
    namespace: &str,
    secret: &Secret,
) -> Result<Change> {
    let name = secret.name_any();
    if cached(&ctx.caches.secrets, namespace, &name).is_some() {
        return Ok(Change::Unchanged);
    }
    // The cache can lag behind the API server; a read protects an existing password.
    let read_error = |source| Error::Read {
        kind: "Secret".to_owned(),
        name: name.clone(),
        source,
    };
    if api.get_opt(&name).await.map_err(read_error)?.is_some() {
        return Ok(Change::Unchanged);
    }
    // Created by a concurrent reconcile between our read and write: keep theirs.
    create(api, secret).await
}
