//! The apply step for a cluster's children: the desired objects (see `desired`) are applied in
//! dependency order — certificates and credentials, configuration, Services, the StatefulSet, then the backup
//! CronJobs, which depend on the StatefulSet being ready — and every write is reported.

use std::fmt::Debug;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::Api;

use super::credentials::apply_secrets;
use super::desired::{BackupCronJob, Desired};
use super::packed_apply::{api, apply_optional, apply_packed};
use super::status::{BackupSchedule, Readiness};
use super::storage::{StorageProgress, expand_claims};
use crate::error::Result;
use crate::resources::Cluster;
use crate::resources::storage::keep_claim_template;
use crate::runtime::apply::{Change, Written, apply, delete};
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

/// Applies `desired` for `cluster`. `restore_pending` holds the CronJob back while a restore
/// has not finished (clients are held by `-rw`'s EndpointSlice: `ha::routing`).
pub async fn apply_children(
    cluster: &Cluster<'_>,
    desired: Desired,
    ctx: &Context,
    restore_pending: bool,
) -> Result<AppliedChildren> {
    let (ns, client, caches) = (cluster.namespace, ctx.client.clone(), &ctx.caches);
    let mut writes = Vec::new();

    writes.extend(apply_secrets(cluster, &desired, ctx).await?);

    // Independent of each other, so sent together (the RoleBinding right after its Role): a
    // new cluster's eight take two round trips, not eight. The pods' account and its role exist
    // before the StatefulSet asks for them.
    // An earlier Tusk's client Service, routed by a selector, is moved by the routing step,
    // which annotates it when done.
    let services = (desired.clients.into_iter())
        .filter(|service| !super::ha::selector_move::moving(ctx, cluster, &service.name_any()))
        .chain([desired.headless])
        .map(|service| apply_packed(api(&client, ns), &caches.services, ns, service));
    // A client Service `spec.services` disables: deleted if the cluster had it.
    let retired = (desired.disabled_clients.into_iter()).map(|name| {
        apply_optional(
            ns,
            name,
            None::<Service>,
            api(&client, ns),
            &caches.services,
        )
    });
    let access = desired.access;
    let (roles, bindings) = (&caches.roles, &caches.role_bindings);
    // The binding after its Role: the API server refuses to bind a Role it cannot find yet.
    let role_then_binding = async {
        let role = apply_packed(api(&client, ns), roles, ns, access.role).await?;
        let binding = apply_packed(api(&client, ns), bindings, ns, access.role_binding).await?;
        Ok::<_, crate::error::Error>([role, binding])
    };
    let config_map = desired.config_map;
    let account = access.service_account;
    let (config_map, services, retired, account, role_and_binding) = futures::try_join!(
        apply_packed(api(&client, ns), &caches.config_maps, ns, config_map),
        futures::future::try_join_all(services),
        futures::future::try_join_all(retired),
        apply_packed(api(&client, ns), &caches.service_accounts, ns, account),
        role_then_binding,
    )?;
    writes.extend(config_map);
    writes.extend(services.into_iter().chain(retired).flatten());
    writes.extend(account);
    writes.extend(role_and_binding.into_iter().flatten());
    let mut desired_statefulset = desired.statefulset;
    let existing = caches
        .statefulsets
        .object(ns, &desired_statefulset.name_any());
    if let Some(existing) = &existing {
        keep_claim_template(&mut desired_statefulset, existing);
    }
    let applied = apply(&api(&client, ns), existing, desired_statefulset).await?;
    writes.extend(Written::of(applied.object.as_ref(), applied.change));
    if let Some((config_map, incoming)) = desired.incoming {
        // A major-version upgrade's new set, with its own configuration.
        let config_map = apply_packed(api(&client, ns), &caches.config_maps, ns, config_map);
        writes.extend(config_map.await?);
        let existing = caches.statefulsets.object(ns, &incoming.name_any());
        let applied = apply(&api(&client, ns), existing, incoming).await?;
        writes.extend(Written::of(applied.object.as_ref(), applied.change));
    }
    let statefulset = applied.object;
    // Both are the cluster's, named after it whichever set serves.
    let name = cluster.name.to_owned();
    let (budget, policy) = futures::try_join!(
        apply_optional(
            ns,
            name.clone(),
            desired.disruption_budget,
            api(&client, ns),
            &caches.disruption_budgets,
        ),
        apply_optional(
            ns,
            name,
            desired.network_policy,
            api(&client, ns),
            &caches.network_policies,
        ),
    )?;
    writes.extend(budget.into_iter().chain(policy));
    let (storage, claims) = expand_claims(cluster, &statefulset, ctx).await?;
    writes.extend(claims);
    writes.extend(super::pooler::apply_pooler(cluster, desired.pooler, ctx).await?);
    let pods = super::ha::pods::cluster_pods(ctx, cluster);
    let readiness = Readiness::of(Some(&statefulset), cluster.spec.instances, &pods);
    let serving = readiness.ready && !restore_pending;

    let api: Api<CronJob> = Api::namespaced(client, ns);
    let backup = cluster.cronjob_name();
    let backup =
        apply_cronjob(ns, &backup, desired.backup, serving, &api, ctx, &mut writes).await?;
    let base = crate::resources::base_backup_cronjob_name(cluster.name);
    apply_cronjob(
        ns,
        &base,
        desired.base_backup,
        serving,
        &api,
        ctx,
        &mut writes,
    )
    .await?;
    Ok(AppliedChildren {
        readiness,
        backup,
        storage,
        writes,
    })
}

/// Applies one scheduled-backup CronJob, or deletes it when it is no longer wanted; returns
/// where its schedule stands.
async fn apply_cronjob(
    ns: &str,
    name: &str,
    desired: Option<BackupCronJob>,
    serving: bool,
    api: &Api<CronJob>,
    ctx: &Context,
    writes: &mut Vec<Written>,
) -> Result<BackupSchedule> {
    let existing = cached(&ctx.caches.cronjobs, ns, name);
    Ok(match desired {
        None => {
            if let Some(existing) = existing {
                delete(api, name).await?;
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
            let applied = apply(api, existing, wanted).await?;
            writes.extend(Written::of(applied.object.as_ref(), applied.change));
            match (suspended_by_user, serving) {
                (true, _) => BackupSchedule::Suspended,
                (false, false) => BackupSchedule::WaitingForReady,
                (false, true) => BackupSchedule::Scheduled,
            }
        }
    })
}
