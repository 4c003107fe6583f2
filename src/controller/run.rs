//! Wiring: one watch per kind, each feeding both a cache (read by reconciles to skip no-op
//! writes) and the controller's triggers.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use super::{Context, Stores, error_policy, reconcile};
use crate::crd::PostgreSQL;
use crate::metrics::Metrics;
use crate::resources::{AgentSettings, MANAGED_BY};

/// Where the controller looks for clusters.
#[derive(Clone, Debug)]
pub enum Scope {
    AllNamespaces,
    Namespace(String),
}

impl Scope {
    fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match self {
            Self::AllNamespaces => Api::all(client.clone()),
            Self::Namespace(ns) => Api::namespaced(client.clone(), ns),
        }
    }
}

/// A watch of `K` that keeps `Store<K>` current and yields every touched object (deletions
/// included, so a child deleted out of band triggers its owner).
fn cached_watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .touched_objects();
    (reader, stream)
}

/// Runs the PostgreSQL controller in `scope` until `shutdown` resolves.
pub async fn run(
    client: Client,
    scope: Scope,
    agent: AgentSettings,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    // Only Tusk's own children are cached: memory grows with clusters, not with the namespace.
    let children =
        watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={MANAGED_BY}"));
    let (clusters, cluster_reader) = {
        let (reader, writer) = reflector::store();
        // Reconcile on spec changes, not on the operator's own status writes.
        let stream = watcher(scope.api::<PostgreSQL>(&client), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .applied_objects()
            .predicate_filter(predicates::generation, Default::default());
        (stream, reader)
    };
    let (secrets, secret_stream) = cached_watch(scope.api::<Secret>(&client), children.clone());
    let (config_maps, config_map_stream) =
        cached_watch(scope.api::<ConfigMap>(&client), children.clone());
    let (services, service_stream) = cached_watch(scope.api::<Service>(&client), children.clone());
    let (statefulsets, statefulset_stream) =
        cached_watch(scope.api::<StatefulSet>(&client), children.clone());
    let (cronjobs, cronjob_stream) = cached_watch(scope.api::<CronJob>(&client), children);

    let stores = Stores {
        clusters: cluster_reader.clone(),
        secrets,
        config_maps,
        services,
        statefulsets,
        cronjobs,
    };
    let context = Arc::new(Context::new(client, agent, stores, metrics));
    info!(?scope, "starting the PostgreSQL controller");
    Controller::for_stream(clusters, cluster_reader)
        .with_config(controller::Config::default().concurrency(8))
        .owns_stream(secret_stream)
        .owns_stream(config_map_stream)
        .owns_stream(service_stream)
        .owns_stream(statefulset_stream)
        .owns_stream(cronjob_stream)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                warn!(error = %e, "controller event");
            }
        })
        .await;
    info!("the PostgreSQL controller stopped");
}
