//! Build and apply every child of a cluster, in dependency order, and report what changed.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret, Service};
use kube::api::Api;

use super::apply::{Change, apply, create, delete};
use super::context::{Context, cached};
use super::status::{BackupSchedule, Readiness};
use crate::error::{Error, Result};
use crate::resources::{self, Cluster};

/// One write the reconcile made, for Events and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub kind: &'static str,
    pub name: String,
    pub action: WriteAction,
}

impl Written {
    /// A reference to the written child, for the `related` field of its Event.
    pub fn reference(&self, namespace: &str) -> ObjectReference {
        let api_version = match self.kind {
            "StatefulSet" => "apps/v1",
            "CronJob" | "Job" => "batch/v1",
            "Backup" => "tusk.dev/v1alpha1",
            _ => "v1",
        };
        ObjectReference {
            api_version: Some(api_version.to_owned()),
            kind: Some(self.kind.to_owned()),
            name: Some(self.name.clone()),
            namespace: Some(namespace.to_owned()),
            ..ObjectReference::default()
        }
    }
}

/// What happened to a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteAction {
    Created,
    Updated,
    Deleted,
}

/// The result of applying every child.
#[derive(Clone, Debug)]
pub struct AppliedChildren {
    pub readiness: Readiness,
    pub backup: BackupSchedule,
    pub writes: Vec<Written>,
}

/// Applies the children of `cluster` in order: credentials, configuration, Services, the
/// StatefulSet, then the backup CronJob, which depends on the StatefulSet being ready.
/// `restore_pending` holds the CronJob back while a restore has not finished.
pub async fn apply_children(
    cluster: &Cluster<'_>,
    ctx: &Context,
    restore_pending: bool,
) -> Result<AppliedChildren> {
    let (ns, client, stores) = (cluster.namespace, ctx.client.clone(), &ctx.stores);
    let mut writes = Vec::new();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for (name, build) in [
        (
            cluster.superuser_secret_name(),
            resources::superuser_secret as SecretBuilder,
        ),
        (cluster.app_secret_name(), resources::app_secret),
    ] {
        let change = ensure_secret(&secrets, ctx, cluster, &name, build).await?;
        record(&mut writes, "Secret", name, change);
    }

    let config_map = resources::config_map(cluster);
    let checksum = resources::config_checksum(&config_map);
    let name = cluster.config_map_name();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let applied = apply(&api, cached(&stores.config_maps, ns, &name), config_map).await?;
    record(&mut writes, "ConfigMap", name, applied.change);

    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    for service in [
        resources::rw_service(cluster),
        resources::headless_service(cluster),
    ] {
        let name = service.metadata.name.clone().unwrap_or_default();
        let applied = apply(&api, cached(&stores.services, ns, &name), service).await?;
        record(&mut writes, "Service", name, applied.change);
    }

    let name = cluster.statefulset_name();
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let desired = resources::statefulset(cluster, &checksum);
    let statefulset = apply(&api, cached(&stores.statefulsets, ns, &name), desired).await?;
    record(&mut writes, "StatefulSet", name, statefulset.change);
    let readiness = Readiness::of(Some(&statefulset.object), cluster.spec.instances);
    let serving = readiness.ready && !restore_pending;

    let name = cluster.cronjob_name();
    let api: Api<CronJob> = Api::namespaced(client, ns);
    let existing = cached(&stores.cronjobs, ns, &name);
    let backup = match &cluster.spec.backup {
        None => {
            if existing.is_some() {
                delete(&api, &name).await?;
                writes.push(Written {
                    kind: "CronJob",
                    name,
                    action: WriteAction::Deleted,
                });
            }
            BackupSchedule::NotConfigured
        }
        // Never create the CronJob before the database has been Ready once.
        Some(_) if existing.is_none() && !serving => BackupSchedule::WaitingForReady,
        Some(policy) => {
            let desired = resources::backup_cronjob(cluster, policy, &ctx.agent, serving);
            let applied = apply(&api, existing, desired).await?;
            record(&mut writes, "CronJob", name, applied.change);
            match (policy.suspend, serving) {
                (true, _) => BackupSchedule::Suspended,
                (false, false) => BackupSchedule::WaitingForReady,
                (false, true) => BackupSchedule::Scheduled,
            }
        }
    };
    Ok(AppliedChildren {
        readiness,
        backup,
        writes,
    })
}

/// Notes a write for Events and metrics; unchanged children are not writes.
fn record(writes: &mut Vec<Written>, kind: &'static str, name: String, change: Change) {
    let action = match change {
        Change::Unchanged => return,
        Change::Created => WriteAction::Created,
        Change::Updated => WriteAction::Updated,
    };
    writes.push(Written { kind, name, action });
}

type SecretBuilder = fn(&Cluster, &str) -> Secret;

/// Creates a credentials Secret once. An existing Secret, ours or one the user brought, is
/// never rewritten: the database keeps the password it was initialised with.
async fn ensure_secret(
    api: &Api<Secret>,
    ctx: &Context,
    cluster: &Cluster<'_>,
    name: &str,
    build: SecretBuilder,
) -> Result<Change> {
    if cached(&ctx.stores.secrets, cluster.namespace, name).is_some() {
        return Ok(Change::Unchanged);
    }
    // The cache can lag behind the API server; a read protects an existing password.
    let read_error = |source| Error::Read {
        kind: "Secret".to_owned(),
        name: name.to_owned(),
        source,
    };
    if api.get_opt(name).await.map_err(read_error)?.is_some() {
        return Ok(Change::Unchanged);
    }
    let secret = build(cluster, &resources::generate_password());
    // Created by a concurrent reconcile between our read and write: keep theirs.
    create(api, &secret).await
}
