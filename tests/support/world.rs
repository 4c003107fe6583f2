//! A cluster and the operator's caches, as a reconcile would find them.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher;
use tusk::clusters::archiving::Archiving;
use tusk::clusters::ha::PrimaryState;
use tusk::clusters::ha::pods::is_ready;
use tusk::clusters::status::{self, BackupSchedule, Outcome, Readiness, RestoreProgress};
use tusk::crd::CLEANUP_FINALIZER;
use tusk::metrics::Metrics;
use tusk::resources::endpoints::{Instance, client_slices, routes};
use tusk::resources::verifiers::Slot;
use tusk::resources::{self, AgentSettings, Cluster, tls};
use tusk::runtime::by_cluster::{ByCluster, backup_cluster, job_cluster};
use tusk::runtime::database_pods::PodStore;
use tusk::runtime::packed::PackedStore;
use tusk::runtime::secret_facts::SecretStore;
use tusk::runtime::statefulset_summary::StatefulSetStore;
use tusk::runtime::{Caches, Context};
use tusk::{Backup, PostgreSQL};

pub use super::certificates::*;
use super::paths::{CONFIG_MAPS, SECRETS};
use super::verifier::Expect;

use super::memory_store::MemoryBucket;

pub const NS: &str = "prod";
pub const AGENT_IMAGE: &str = "ghcr.io/tusk-operator/backup-agent:test";

pub const MINIMAL: &str = "storage: {size: 1Gi}";
/// Nightly backups to MinIO; the builder tests in src/ use the same spec.
pub const WITH_BACKUP: &str = include_str!("../fixtures/with-s3-backup.yaml");

/// A PostgreSQL as the API server hands it to the operator.
pub fn postgresql(spec_yaml: &str) -> PostgreSQL {
    let spec: serde_json::Value = serde_saphyr::from_str(spec_yaml).expect("spec is YAML");
    serde_json::from_value(serde_json::json!({
        "apiVersion": "tusk.dev/v1alpha1",
        "kind": "PostgreSQL",
        "metadata": {"name": "demo", "namespace": NS, "uid": "c0ffee", "generation": 1,
                     "creationTimestamp": "2026-11-22T10:00:00Z"},
        "spec": spec,
    }))
    .expect("spec matches the API")
}

/// `pg` as it is once the operator added its cleanup finalizer.
pub fn with_finalizer(mut pg: PostgreSQL) -> PostgreSQL {
    pg.metadata.finalizers = Some(vec![CLEANUP_FINALIZER.to_owned()]);
    pg
}

pub fn agent() -> AgentSettings {
    AgentSettings {
        image: AGENT_IMAGE.to_owned(),
    }
}

pub fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).expect("valid time"))
}

/// What the operator's watches have seen.
#[derive(Default, Clone)]
pub struct Cache {
    pub secrets: Vec<Secret>,
    pub config_maps: Vec<ConfigMap>,
    pub services: Vec<Service>,
    pub statefulsets: Vec<StatefulSet>,
    pub cronjobs: Vec<CronJob>,
    pub service_accounts: Vec<ServiceAccount>,
    pub roles: Vec<Role>,
    pub role_bindings: Vec<RoleBinding>,
    pub disruption_budgets: Vec<PodDisruptionBudget>,
    pub network_policies: Vec<NetworkPolicy>,
    pub deployments: Vec<Deployment>,
    pub endpoint_slices: Vec<EndpointSlice>,
    pub pods: Vec<Pod>,
    pub jobs: Vec<Job>,
    pub backups: Vec<Backup>,
}

impl Cache {
    /// Every child exactly as the builders make it, with the StatefulSet `ready` or not and the
    /// CronJob present when the cluster has a backup policy.
    pub fn converged(pg: &PostgreSQL, ready: bool) -> Self {
        let cluster = Cluster::new(pg).expect("complete cluster");
        let restore_pending = pg.spec.restore.is_some()
            && pg.status.as_ref().is_none_or(|s| s.restored_from.is_none());
        let config_map = resources::config_map(&cluster).expect("valid parameters");
        let checksum = resources::config_checksum(&config_map);
        let statefulset =
            statefulset_with_status(resources::statefulset(&cluster, &checksum, &agent()), ready);
        let cronjobs = (pg.spec.backup.as_ref())
            .map(|policy| {
                let logical = resources::backup_cronjob(&cluster, policy, &agent(), ready);
                let base = resources::base_backup_cronjob(&cluster, policy, &agent(), ready);
                [Some(logical), base]
            })
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        let issued = tls::ServerCertificates {
            server: pem("server"),
            replication: pem("replication"),
            upgrade: None,
        };
        let server = tls::server_secret(
            &cluster,
            &issued,
            &pem("ca").cert,
            time::OffsetDateTime::now_utc() + tls::SERVER_LIFETIME,
        );
        // What the server Secret's ca.crt holds, as the operator publishes it.
        let server_ca = (server.data.as_ref())
            .and_then(|data| data.get(tls::CA_CRT))
            .map(|ca| String::from_utf8_lossy(&ca.0).into_owned())
            .expect("the server Secret's ca.crt");
        // The credentials carry the CA that signed the server's certificate.
        let trusted =
            |secret| resources::with_ca(&secret, &secret, &pem("ca").cert).expect("a login");
        Self {
            secrets: vec![
                trusted(resources::superuser_secret(&cluster, "su-password")),
                trusted(resources::app_secret(&cluster, "app-password")),
                resources::replication_secret(&cluster, "replication-password"),
                resources::monitoring_secret(&cluster, "status-token"),
                steady_ca_secret(&cluster, &pem("ca")),
                server,
                // The verifiers of exactly these passwords (the digests agree).
                resources::verifiers::verifiers_secret(
                    &cluster,
                    &[
                        (Slot::Superuser, "su-password"),
                        (Slot::App, "app-password"),
                    ],
                ),
            ],
            config_maps: vec![config_map, resources::published_ca(&cluster, &server_ca)],
            services: resources::client_services(&cluster)
                .into_iter()
                .chain([resources::headless_service(&cluster)])
                .collect(),
            statefulsets: vec![statefulset],
            cronjobs,
            service_accounts: vec![resources::instance_service_account(&cluster)],
            roles: vec![resources::instance_role(&cluster)],
            role_bindings: vec![resources::instance_role_binding(&cluster)],
            disruption_budgets: resources::disruption_budget(&cluster).into_iter().collect(),
            network_policies: resources::network_policy(&cluster, "tusk-system")
                .into_iter()
                .collect(),
            deployments: Vec::new(),
            // No pods: the client Services route nowhere.
            endpoint_slices: client_slices(&cluster, &routes(&[], None, !restore_pending)).into(),
            pods: Vec::new(),
            jobs: Vec::new(),
            backups: Vec::new(),
        }
    }
}

impl Cache {
    /// The database pods `pods`, with the client Services' EndpointSlices routing them (`-rw`
    /// to the Ready one labelled primary), as the reconcile that labelled them left them.
    pub fn set_pods(&mut self, pg: &PostgreSQL, pods: Vec<Pod>) {
        let cluster = Cluster::new(pg).expect("complete cluster");
        let label = |pod: &Pod| {
            (pod.metadata.labels.as_ref()).and_then(|l| l.get("tusk.dev/role").cloned())
        };
        let holder = pods
            .iter()
            .find(|pod| label(pod).as_deref() == Some("primary"))
            .and_then(|pod| pod.metadata.name.clone());
        let instances: Vec<Instance> = pods
            .iter()
            .filter_map(|pod| {
                Some(Instance {
                    pod: pod.metadata.name.as_deref()?,
                    ip: pod.status.as_ref()?.pod_ip.as_deref(),
                    ready: is_ready(pod),
                })
            })
            .collect();
        let routes = routes(&instances, holder.as_deref(), true);
        self.endpoint_slices = client_slices(&cluster, &routes).into();
        self.pods = pods;
    }

    /// ConfigMap `<name>-ca.crt` as the operator publishes `bundle`, in place of the cached one.
    pub fn publish_ca(&mut self, cluster: &Cluster, bundle: &str) {
        let name = cluster.published_ca_name();
        self.config_maps
            .retain(|c| c.metadata.name.as_deref() != Some(name.as_str()));
        self.config_maps
            .push(resources::published_ca(cluster, bundle));
    }
}

/// A cluster whose children all match the builders and whose status the operator already wrote:
/// the state of a converged cluster.
pub fn converged(spec_yaml: &str, ready: bool, backup: BackupSchedule) -> (PostgreSQL, Cache) {
    let mut pg = postgresql(spec_yaml);
    if pg.spec.backup.is_some() {
        pg = with_finalizer(pg);
    }
    let cache = Cache::converged(&pg, ready);
    let mut status = status_for(&pg, ready, backup, &at(1_000));
    status.certificates = certificate_times(&cache);
    // Backups were scheduled just now: a schedule without a success since 1970 is overdue.
    let scheduled = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == "BackupScheduled");
    if let Some(condition) = scheduled.filter(|c| c.status == "True") {
        condition.last_transition_time = Time(Timestamp::now());
    }
    pg.status = Some(status);
    (pg, cache)
}

/// The StatefulSet as the API server reports it: generation 1, all or no replicas ready.
pub fn statefulset_with_status(mut sts: StatefulSet, ready: bool) -> StatefulSet {
    sts.metadata.generation = Some(1);
    let replicas = i32::from(ready);
    sts.status = Some(StatefulSetStatus {
        observed_generation: Some(1),
        replicas: 1,
        ready_replicas: Some(replicas),
        updated_replicas: Some(1),
        ..StatefulSetStatus::default()
    });
    sts
}

/// The status the operator would have written for `readiness` and `backup`.
pub fn status_for(
    pg: &PostgreSQL,
    ready: bool,
    backup: BackupSchedule,
    now: &Time,
) -> tusk::crd::PostgreSQLStatus {
    let cluster = Cluster::new(pg).expect("complete cluster");
    let outcome = Outcome::Applied {
        readiness: Readiness {
            instances: 1,
            ready_instances: i32::from(ready),
            ready,
            rolling_out: false,
        },
        backup,
        restore: RestoreProgress::NotRequested,
        backups: Box::default(),
        storage: None,
        // The Lease exists and ordinal 0 holds it.
        primary: Box::new(PrimaryState::held_by("demo-0")),
        archiving: Box::new(Archiving::NotConfigured),
        upgrade: Box::default(),
        declared: Box::default(),
    };
    status::compute(
        pg.status.as_ref(),
        &cluster,
        pg.metadata.generation,
        &outcome,
        now,
    )
}

fn store_of<K>(objects: Vec<K>) -> (Store<K>, Writer<K>)
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let (reader, mut writer) = reflector::store();
    // A completed initial list, as the watches deliver it: the caches are ready.
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    (reader, writer)
}

/// The reconcile's context over `client`, with caches holding `cache` and `pg`.
pub fn context(client: Client, pg: &PostgreSQL, cache: Cache) -> Arc<Context> {
    context_with(client, pg, cache, MemoryBucket::default())
}

/// Like [`context`], with the bucket `bucket`.
pub fn context_with(
    client: Client,
    pg: &PostgreSQL,
    cache: Cache,
    bucket: MemoryBucket,
) -> Arc<Context> {
    Arc::new(plain_context(client, pg, cache, bucket))
}

/// The context itself, for scenarios that replace parts of it.
pub fn plain_context(
    client: Client,
    pg: &PostgreSQL,
    cache: Cache,
    bucket: MemoryBucket,
) -> Context {
    let (jobs, backups) = (store_of(cache.jobs).0, store_of(cache.backups).0);
    let caches = Caches {
        clusters: store_of(vec![pg.clone()]).0,
        secrets: SecretStore::of(cache.secrets),
        config_maps: PackedStore::of(cache.config_maps),
        services: PackedStore::of(cache.services),
        statefulsets: StatefulSetStore::of(cache.statefulsets),
        cronjobs: store_of(cache.cronjobs).0,
        service_accounts: PackedStore::of(cache.service_accounts),
        roles: PackedStore::of(cache.roles),
        role_bindings: PackedStore::of(cache.role_bindings),
        disruption_budgets: PackedStore::of(cache.disruption_budgets),
        network_policies: PackedStore::of(cache.network_policies),
        deployments: PackedStore::of(cache.deployments),
        endpoint_slices: PackedStore::of(cache.endpoint_slices),
        pods: PodStore::of(cache.pods),
        jobs_by_cluster: ByCluster::of(jobs.clone(), job_cluster),
        backups_by_cluster: ByCluster::of(backups.clone(), backup_cluster),
        jobs,
        backups,
    };
    Context::new(
        client,
        agent(),
        caches,
        Arc::new(Metrics::default()),
        Arc::new(bucket),
    )
}

/// A Backup of `demo` as the API server hands it over; `scheduled` marks an operator record.
pub fn backup(name: &str, scheduled: bool) -> Backup {
    let labels = if scheduled {
        serde_json::json!({"tusk.dev/scheduled": "true", "tusk.dev/cluster": "demo"})
    } else {
        serde_json::json!({})
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "tusk.dev/v1alpha1",
        "kind": "Backup",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "labels": labels},
        "spec": {"cluster": {"name": "demo"}},
    }))
    .expect("a valid Backup")
}

/// A Completed Backup, as the operator records it.
pub fn completed_backup(name: &str, completed_at: &str) -> Backup {
    let mut b = backup(name, false);
    b.status = serde_json::from_value(serde_json::json!({
        "phase": "Completed", "backupId": name, "completedAt": completed_at,
        "destination": {"s3": {"bucket": "backups", "endpoint": "http://minio.minio.svc:9000",
                               "forcePathStyle": true}},
    }))
    .expect("a valid status");
    b
}

/// A Job named `name`, owned by `owner_kind/owner_name` with `owner_uid`, in `condition`
/// (`Complete`, `Failed` or none for a running Job).
pub fn job(
    name: &str,
    owner: (&str, &str, &str),
    condition: Option<&str>,
    labels: serde_json::Value,
) -> Job {
    let (kind, owner_name, uid) = owner;
    let conditions = match condition {
        Some(type_) => serde_json::json!([{"type": type_, "status": "True",
            "reason": if type_ == "Failed" { "BackoffLimitExceeded" } else { "Completed" },
            "message": if type_ == "Failed" { "Job has reached the specified backoff limit" } else { "" }}]),
        None => serde_json::json!([]),
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": kind, "name": owner_name, "uid": uid, "controller": true}]},
        "spec": {"template": {"spec": {"containers": []}}},
        "status": {"startTime": "2026-11-22T02:00:00Z", "completionTime": "2026-11-22T02:01:00Z",
                   "conditions": conditions},
    }))
    .expect("a valid Job")
}

/// The bytes of a manifest for backup `id` of `prod/demo`, recording no owner (as before
/// owners were recorded).
pub fn manifest_json(id: &str, completed_at: &str) -> Vec<u8> {
    owned_manifest_json(id, completed_at, None)
}

/// Like [`manifest_json`], written by the cluster with uid `owner` (`demo`'s is `c0ffee`).
pub fn owned_manifest_json(id: &str, completed_at: &str, owner: Option<&str>) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "formatVersion": 1, "backupId": id, "namespace": NS, "cluster": "demo", "clusterUid": owner,
        "startedAt": "2026-11-22T02:00:00Z", "completedAt": completed_at,
        "serverVersion": "18.1", "pgDumpVersion": "pg_dump (PostgreSQL) 18.1", "compression": "zstd",
        "files": [{"name": "globals.sql.zst", "kind": "globals", "sizeBytes": 100, "sha256": "aa"},
                  {"name": "app.dump.zst", "kind": "database", "database": "app", "sizeBytes": 900, "sha256": "bb"}],
    }))
    .expect("manifest JSON")
}

/// Sets `pg`'s status to one computed afresh for a cluster that is not ready (yet).
pub fn not_ready_status(pg: &mut PostgreSQL, schedule: BackupSchedule) {
    let certificates = pg.status.as_ref().and_then(|s| s.certificates.clone());
    pg.status = None;
    let mut status = status_for(pg, false, schedule, &at(1_000));
    status.certificates = certificates;
    pg.status = Some(status);
}

/// Removes the object named `name` from a cache list, as if deleted out of band.
pub fn remove_named<K: kube::ResourceExt>(objects: &mut Vec<K>, name: &str) {
    objects.retain(|o| o.name_any() != name);
}

/// Placeholder PEM text: the operator caches Secrets for their existence only.
fn pem(what: &str) -> tls::Pem {
    tls::Pem {
        cert: format!("{what} certificate"),
        key: format!("{what} key"),
    }
}

/// A read of `name` answered with the Secret the converged `cache` holds under that name.
pub fn get_cached_secret(cache: &Cache, name: &str) -> Expect {
    let secret = cache
        .secrets
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
        .map(|s| serde_json::to_value(s).expect("serialisable"))
        .expect("in the converged cache");
    Expect::new(http::Method::GET, format!("{SECRETS}/{name}"), move |_| {
        (http::StatusCode::OK, secret)
    })
}

/// The credentials following a new CA: each read (answered from `cache`), then applied.
pub fn credentials_follow(cache: &Cache) -> Vec<Expect> {
    let follow = ["demo-superuser", "demo-app"]
        .into_iter()
        .flat_map(|name| {
            [
                get_cached_secret(cache, name),
                Expect::apply(format!("{SECRETS}/{name}")),
            ]
        })
        .chain([Expect::apply(format!("{CONFIG_MAPS}/demo-ca.crt"))])
        .collect();
    // Each credentials Secret is its own read and write; the two are sent together, with the
    // bundle published without a key.
    super::verifier::together(follow)
}
