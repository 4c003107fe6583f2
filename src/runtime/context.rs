//! Everything a reconcile needs, shared by all of them: the client, the caches of children, the
//! event recorder, metrics and the error backoff.

use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::store::WriterDropped;
use kube::runtime::reflector::{ObjectRef, Store};

use super::backoff::ErrorBackoff;
use super::buckets::Buckets;
use super::by_cluster::ByCluster;
use super::cluster_locks::ClusterLocks;
use super::compact::compact_cronjob;
use super::database_pods::PodStore;
use super::instance_reader::InstanceReader;
use super::instances::{LeaseClock, StatusSource};
use super::lease_follows::LeaseFollows;
use super::own_status::OwnStatus;
use super::packed::Packed;
use super::secret_facts::SecretFacts;
use super::statefulset_summary::StatefulSetSummary;
use super::summaries::{CacheEnded, SummaryStore};
use super::watch::{ChildWatches, Trigger, owning_cluster};
use crate::crd::{Backup, PostgreSQL};
use crate::metrics::Metrics;
use crate::resources::ca_rotation::Lifetimes;
use crate::resources::{AgentSettings, STATUS_PORT, endpoints};

/// The children a cluster owns. This is the one list: each entry is a field of [`Caches`], a
/// watch started by [`watch_owned`] that triggers the owning cluster, and a cache
/// [`Caches::children_ready`] waits for. `cached` kinds are read by reconciles and kept as
/// objects, each with its compaction (see `compact`); `summarized` kinds are kept as a summary
/// of each object (see `summaries`): Secrets as the few facts read of them, the kinds only an
/// apply's comparison reads as packed JSON.
macro_rules! owned_children {
    (
        cached { $($(#[$doc:meta])* $field:ident: $kind:ty => $compact:expr,)* }
        summarized {
            $($(#[$pdoc:meta])* $pfield:ident: $pkind:ty => $summary:ty $(, only $narrow:expr)?;)*
        }
    ) => {
        /// The watch caches: the clusters, their children and the Backups, fed by the same
        /// watches that trigger reconciles.
        #[derive(Clone)]
        pub struct Caches {
            pub clusters: Store<PostgreSQL>,
            $($(#[$doc])* pub $field: Store<$kind>,)*
            $($(#[$pdoc])* pub $pfield: SummaryStore<$pkind, $summary>,)*
            /// The database pods (their names, labels read, readiness and IP), for roles and
            /// failover.
            pub pods: PodStore,
            /// Tusk's Jobs: backup runs (scheduled and on demand) and restores.
            pub jobs: Store<Job>,
            /// Every Backup in scope.
            pub backups: Store<Backup>,
            /// The Jobs and the Backups of each cluster (see `by_cluster`).
            pub jobs_by_cluster: ByCluster<Job>,
            pub backups_by_cluster: ByCluster<Backup>,
        }

        impl Caches {
            /// Waits until every child cache has been filled by its first list. Before that a
            /// cache miss means "not seen yet", not "absent", and acting on it would rewrite
            /// existing objects.
            pub async fn children_ready(&self) -> Result<(), CacheEnded> {
                let ended = |_: WriterDropped| CacheEnded;
                $(self.$field.wait_until_ready().await.map_err(ended)?;)*
                $(self.$pfield.wait_until_ready().await?;)*
                self.pods.wait_until_ready().await?;
                self.jobs.wait_until_ready().await.map_err(ended)?;
                self.backups.wait_until_ready().await.map_err(ended)
            }
        }

        /// The owned children's caches, as their watches (`drivers`) fill them.
        pub struct OwnedWatches {
            $($field: Store<$kind>,)*
            $($pfield: SummaryStore<$pkind, $summary>,)*
            pub drivers: Vec<BoxFuture<'static, ()>>,
        }

        /// Starts a watch of every owned kind; each change triggers the owning cluster.
        pub fn watch_owned(watches: &ChildWatches<'_>) -> OwnedWatches {
            let mut drivers = Vec::new();
            $(
                let ($field, driver) = watches.cached::<$kind>($compact, owning_cluster);
                drivers.push(driver);
            )*
            $(
                let narrow: Option<&str> = None $(.or(Some($narrow)))?;
                let ($pfield, driver) =
                    watches.summarized::<$pkind, $summary>(owning_cluster, narrow);
                drivers.push(driver);
            )*
            OwnedWatches { $($field,)* $($pfield,)* drivers }
        }

        impl Caches {
            /// The caches of `owned` with the clusters', pods', Jobs' and Backups'.
            pub fn new(
                clusters: Store<PostgreSQL>,
                owned: OwnedWatches,
                pods: PodStore,
                (jobs, jobs_by_cluster): (Store<Job>, ByCluster<Job>),
                (backups, backups_by_cluster): (Store<Backup>, ByCluster<Backup>),
            ) -> (Self, Vec<BoxFuture<'static, ()>>) {
                let caches = Self {
                    clusters,
                    $($field: owned.$field,)*
                    $($pfield: owned.$pfield,)*
                    pods,
                    jobs,
                    backups,
                    jobs_by_cluster,
                    backups_by_cluster,
                };
                (caches, owned.drivers)
            }
        }
    };
}

owned_children! {
    cached {
        cronjobs: CronJob => compact_cronjob,
    }
    summarized {
        /// Read for readiness and the rollout too: packed, with generation and status beside.
        statefulsets: StatefulSet => StatefulSetSummary;
        /// Credentials and certificates: owner and recorded annotations, never a value.
        secrets: Secret => SecretFacts;
        config_maps: ConfigMap => Packed;
        services: Service => Packed;
        /// The database pods' identity: account, Role, binding.
        service_accounts: ServiceAccount => Packed;
        roles: Role => Packed;
        role_bindings: RoleBinding => Packed;
        disruption_budgets: PodDisruptionBudget => Packed;
        network_policies: NetworkPolicy => Packed;
        /// With `spec.pooler`: the PgBouncer Deployment.
        deployments: Deployment => Packed;
        /// `-rw`'s EndpointSlice (not kube-controller-manager's slices of the other Services).
        endpoint_slices: EndpointSlice => Packed,
            only endpoints::OPERATOR_SLICES;
    }
}

/// The shared state of both controllers.
pub struct Context {
    pub client: Client,
    pub agent: AgentSettings,
    pub caches: Caches,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub backoff: ErrorBackoff<PostgreSQL>,
    pub backup_backoff: ErrorBackoff<Backup>,
    /// Opens backup buckets, for manifests, retention and cleanup.
    pub buckets: Arc<dyn Buckets>,
    /// When each primary Lease was last seen to change.
    pub lease_clock: Arc<LeaseClock>,
    /// The Leases of switchovers in progress, watched so their steps reach the primary lane.
    pub lease_follows: Arc<LeaseFollows>,
    /// Whose turn it is on each cluster: the reconcile's, the primary lane's or the creation
    /// lane's.
    pub cluster_locks: Arc<ClusterLocks>,
    /// Where the main queue hands new clusters (`clusters::creation_lane`); none: it
    /// reconciles them itself.
    pub creation_lane: Option<UnboundedSender<Trigger>>,
    /// The clusters' status writes the watch has not brought back yet.
    pub own_status: Arc<OwnStatus>,
    /// The instance managers' `/status`, read during a failover.
    pub instances: Arc<dyn StatusSource>,
    /// The cluster's DNS domain (`TUSK_CLUSTER_DOMAIN`, default `cluster.local`): the fully
    /// qualified names the server certificates carry.
    pub cluster_domain: String,
    /// How long the certificates Tusk issues live (ten and two years but in tests).
    pub certificate_lifetimes: Lifetimes,
    /// Where the operator's own pods run (`POD_NAMESPACE`, default `tusk-system`): a cluster's
    /// NetworkPolicy admits them to the instance managers.
    pub operator_namespace: String,
}

impl Context {
    pub fn new(
        client: Client,
        agent: AgentSettings,
        caches: Caches,
        metrics: Arc<Metrics>,
        buckets: Arc<dyn Buckets>,
    ) -> Self {
        let reporter = Reporter {
            controller: "tusk-operator".to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        // The port is a small constant: the cast cannot truncate.
        let instances = Arc::new(InstanceReader::new(client.clone(), STATUS_PORT as u16));
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            agent,
            caches,
            metrics,
            backoff: ErrorBackoff::default(),
            backup_backoff: ErrorBackoff::default(),
            buckets,
            lease_clock: Arc::default(),
            lease_follows: Arc::default(),
            cluster_locks: Arc::default(),
            creation_lane: None,
            own_status: Arc::default(),
            instances,
            certificate_lifetimes: Lifetimes::default(),
            operator_namespace: std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "tusk-system".to_owned()),
            cluster_domain: std::env::var("TUSK_CLUSTER_DOMAIN")
                .ok()
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| "cluster.local".to_owned()),
        }
    }
}

impl Context {
    /// The same context reading instance reports from `instances`.
    pub fn with_instances(mut self, instances: Arc<dyn StatusSource>) -> Self {
        self.instances = instances;
        self
    }

    /// The same context issuing certificates with `lifetimes`.
    pub fn with_certificate_lifetimes(mut self, lifetimes: Lifetimes) -> Self {
        self.certificate_lifetimes = lifetimes;
        self
    }

    /// The same context keeping its status writes in `own` (which the clusters' watch updates).
    pub fn with_own_status(mut self, own: Arc<OwnStatus>) -> Self {
        self.own_status = own;
        self
    }

    /// The same context remembering Leases in `clock` (shared with another context).
    pub fn with_lease_clock(mut self, clock: Arc<LeaseClock>) -> Self {
        self.lease_clock = clock;
        self
    }

    /// The same context handing clusters still to be created to `lane`.
    pub fn with_creation_lane(mut self, lane: UnboundedSender<Trigger>) -> Self {
        self.creation_lane = Some(lane);
        self
    }

    /// The same context following switchovers' Leases with `follows`.
    pub fn with_lease_follows(mut self, follows: LeaseFollows) -> Self {
        self.lease_follows = Arc::new(follows);
        self
    }
}

/// The cached object `name` in `namespace`, if the watch has seen it.
pub fn cached<K>(store: &Store<K>, namespace: &str, name: &str) -> Option<Arc<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store.get(&ObjectRef::new(name).within(namespace))
}
