//! The composition root: one watch per kind (see `runtime::watch`), the shared context, and the
//! PostgreSQL and Backup controllers with the triggers that connect them. The only module that
//! knows both controllers.

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedReceiver;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, ResourceExt};
use tracing::{debug, info, warn};

use crate::clusters::primary_lane;
use crate::crd::{Backup, PostgreSQL};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::resources::ca_rotation::Lifetimes;
use crate::resources::{AgentSettings, CLUSTER_LABEL, MANAGED_BY, SWITCHOVER_ANNOTATION};
use crate::runtime::buckets::SecretBuckets;
use crate::runtime::by_cluster::{backup_cluster, job_cluster};
use crate::runtime::context::watch_owned;
use crate::runtime::instances::LeaseClock;
use crate::runtime::lease_follows::LeaseFollows;
use crate::runtime::own_status::OwnStatus;
use crate::runtime::watch::{
    ChildWatches, RelistSignal, Trigger, drop_managed_fields, labelled_cluster, shared_watch,
};
use crate::runtime::{Caches, Context};
use crate::{backups, clusters};

/// Objects per list request when a watch (re)starts.
const LIST_PAGE: u32 = 100;
/// Reconciles at once on the primary lane: it holds only clusters whose primary is lost.
const PRIMARY_LANE_CONCURRENCY: u16 = 4;

pub use crate::runtime::watch::Scope;

/// The cluster a Job concerns, to reconcile it when it changes.
fn cluster_of_job(job: Arc<Job>) -> Option<ObjectRef<PostgreSQL>> {
    let cluster = job.labels().get(CLUSTER_LABEL)?;
    Some(ObjectRef::new(cluster).within(&job.namespace()?))
}

/// The clusters a Backup concerns: the one it backs up (its status shows the last backup) and
/// any new cluster waiting to be restored from it.
fn clusters_of_backup(backup: &Backup, clusters: &Store<PostgreSQL>) -> Vec<ObjectRef<PostgreSQL>> {
    let Some(namespace) = backup.namespace() else {
        return Vec::new();
    };
    let name = backup.name_any();
    let restoring = clusters.state().into_iter().filter(|pg| {
        pg.namespace().as_deref() == Some(namespace.as_str())
            && pg
                .spec
                .restore
                .as_ref()
                .and_then(|r| r.backup.as_ref())
                .is_some_and(|b| b.name == name)
    });
    std::iter::once(ObjectRef::new(&backup.spec.cluster.name).within(&namespace))
        .chain(restoring.map(|pg| ObjectRef::from_obj(pg.as_ref())))
        .collect()
}

/// Backup Jobs are named after their Backup (the name is the backup id); verification Jobs are
/// owned by theirs; restore Jobs have none.
fn backup_of_job(job: Arc<Job>) -> Option<ObjectRef<Backup>> {
    let component = job.labels().get("app.kubernetes.io/component")?;
    let namespace = job.namespace()?;
    match component.as_str() {
        "backup" => Some(ObjectRef::new(&job.name_any()).within(&namespace)),
        "verify" => {
            let owner = job.owner_references().iter().find(|o| o.kind == "Backup")?;
            Some(ObjectRef::new(&owner.name).within(&namespace))
        }
        _ => None,
    }
}

/// Logs what a controller reports. A trigger for an object that is gone (a deleted cluster, a
/// scheduled Job not yet recorded as a Backup) is expected and only worth a debug line.
fn log_result<T, E: std::error::Error + 'static>(
    controller: &'static str,
    result: Result<T, controller::Error<E, watcher::Error>>,
) {
    match result {
        Ok(_) => {}
        Err(controller::Error::ObjectNotFound(object)) => {
            debug!(controller, %object, "triggered for an object that no longer exists");
        }
        Err(e) => warn!(controller, error = %e, "controller event"),
    }
}

/// How the controllers run: what every scope shares.
#[derive(Clone, Debug)]
pub struct Settings {
    pub agent: AgentSettings,
    /// The deadline of each call to a backup bucket.
    pub bucket_timeout: std::time::Duration,
    pub certificate_lifetimes: Lifetimes,
    /// How many clusters are reconciled at once.
    pub concurrency: u16,
}

/// Runs the PostgreSQL and Backup controllers in `scope` until `shutdown` resolves.
pub async fn run(
    client: Client,
    scope: Scope,
    settings: Settings,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let Settings {
        agent,
        bucket_timeout,
        certificate_lifetimes,
        concurrency,
    } = settings;
    // Only Tusk's own children are cached: memory grows with clusters, not with the namespace.
    // Lists of 100, not kube's 500: a page is deserialized whole before its objects are
    // compacted and cached, so the page size bounds the memory a (re)start needs on top.
    let children = watcher::Config::default()
        .labels(&format!("app.kubernetes.io/managed-by={MANAGED_BY}"))
        .page_size(LIST_PAGE);
    let (relisted, relists) = futures::channel::mpsc::unbounded();
    let own_status = Arc::new(OwnStatus::default());
    // Set once the clusters' store holds its first list (see the primary lane below).
    let (listed, lane_may_start) = tokio::sync::watch::channel(false);
    let (clusters, cluster_reader) = {
        let (reader, writer) = reflector::store();
        let mut relist = RelistSignal::new(relisted);
        let own = own_status.clone();
        // Reconcile on spec changes and switchover requests, not on the operator's own status
        // writes.
        let stream = watcher(
            scope.api::<PostgreSQL>(&client),
            watcher::Config::default().page_size(LIST_PAGE),
        )
        .default_backoff()
        .modify(drop_managed_fields)
        .reflect(writer)
        .inspect(move |event| {
            relist.observe(event);
            own.observe(event);
            if let Ok(watcher::Event::InitDone) = event {
                listed.send_replace(true);
            }
        })
        .applied_objects()
        .predicate_filter(spec_or_request, Default::default());
        (stream, reader)
    };
    let (triggers, trigger_queue) = futures::channel::mpsc::unbounded();
    let child = ChildWatches {
        scope: &scope,
        client: &client,
        config: children.clone(),
        triggers,
    };
    let owned = watch_owned(&child);
    // Database pods only (not the Jobs'). Their owner is the StatefulSet, so they trigger
    // their cluster through its label instead; a lost primary's also goes on the primary lane.
    let lease_clock = Arc::new(LeaseClock::default());
    let (lane_triggers, lane_queue) = futures::channel::mpsc::unbounded();
    let (creation_triggers, creation_queue) = futures::channel::mpsc::unbounded();
    let lease_follows = LeaseFollows::new(lane_triggers.clone());
    let lane = {
        let (clusters, clock) = (cluster_reader.clone(), lease_clock.clone());
        move |pod: &Pod| primary_lane::lane_trigger(pod, &clusters, &clock)
    };
    let database_pods = ChildWatches {
        config: children.clone().labels(&format!(
            "app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component=database"
        )),
        ..child
    };
    let (pods, pods_driver) =
        database_pods.summarized_with_lane(labelled_cluster, None, lane, lane_triggers);
    let (jobs, jobs_by_cluster, job_events, jobs_driver) =
        shared_watch(scope.api::<Job>(&client), children, job_cluster);
    let (backups, backups_by_cluster, backup_events, backups_driver) = shared_watch(
        scope.api::<Backup>(&client),
        watcher::Config::default().page_size(LIST_PAGE),
        backup_cluster,
    );

    metrics.watch_clusters(cluster_reader.clone());
    let (caches, mut drivers) = Caches::new(
        cluster_reader.clone(),
        owned,
        pods,
        (jobs, jobs_by_cluster),
        (backups.clone(), backups_by_cluster),
    );
    metrics.watch_secrets(caches.secrets.clone());
    drivers.extend([pods_driver, jobs_driver.boxed(), backups_driver.boxed()]);
    let buckets = Arc::new(SecretBuckets::new(client.clone(), bucket_timeout));
    let context = Arc::new(
        Context::new(client, agent, caches, metrics, buckets)
            .with_certificate_lifetimes(certificate_lifetimes)
            .with_own_status(own_status)
            .with_lease_clock(lease_clock)
            .with_lease_follows(lease_follows)
            .with_creation_lane(creation_triggers),
    );
    // Both controllers stop on the same signal.
    let shutdown = futures::FutureExt::shared(shutdown);
    let controllers = {
        let (context, stopping) = (context.clone(), shutdown.clone());
        async move {
            // One waiter, before any reconcile: kube's Store::wait_until_ready wakes only the
            // last of several concurrent waiters, so reconciles waiting side by side would each
            // sit out the full cache-sync timeout.
            tokio::select! {
                ready = context.caches.children_ready() => if ready.is_err() {
                    warn!("a watch ended before its first list; not starting the controllers");
                    return;
                },
                () = stopping => return,
            }
            info!(
                ?scope,
                "caches filled; starting the PostgreSQL and Backup controllers"
            );
            let restoring_lookup = cluster_reader.clone();
            // The primary lane: the same reconcile, fed only by lost primaries and its own
            // next looks, so that a burst on the main queue never delays a failover.
            let lane = Lane {
                name: "primary lane",
                queue: lane_queue,
                concurrency: PRIMARY_LANE_CONCURRENCY,
                may_start: lane_may_start.clone(),
            }
            .run(
                (cluster_reader.clone(), context.clone(), shutdown.clone()),
                primary_lane::reconcile,
                primary_lane::error_policy,
            );
            // The creation lane: clusters still to be created, handed over by the main queue,
            // so that converged clusters never wait behind a burst of first reconciles.
            let creation = Lane {
                name: "creation lane",
                queue: creation_queue,
                concurrency,
                may_start: lane_may_start,
            }
            .run(
                (cluster_reader.clone(), context.clone(), shutdown.clone()),
                clusters::reconcile::reconcile_new,
                clusters::error_policy,
            );
            let clusters = Controller::for_stream(clusters, cluster_reader)
                .with_config(controller::Config::default().concurrency(concurrency))
                .reconcile_on(trigger_queue)
                .reconcile_all_on(relists)
                .watches_shared_stream(job_events.clone(), cluster_of_job)
                .watches_shared_stream(backup_events.clone(), move |backup| {
                    clusters_of_backup(&backup, &restoring_lookup)
                })
                .graceful_shutdown_on(shutdown.clone())
                .run(clusters::reconcile, clusters::error_policy, context.clone())
                .for_each(|result| async move { log_result("postgresql", result) });
            let backup_controller = Controller::for_shared_stream(backup_events, backups)
                .with_config(controller::Config::default().concurrency(4))
                .watches_shared_stream(job_events, backup_of_job)
                .graceful_shutdown_on(shutdown.clone())
                .run(backups::reconcile, backups::error_policy, context)
                .for_each(|result| async move { log_result("backup", result) });
            futures::future::join4(clusters, lane, creation, backup_controller).await;
        }
    };
    // The watch drivers never end on their own; the controllers' end ends the run.
    let drivers = futures::future::join_all(drivers);
    tokio::select! {
        _ = controllers => {}
        _ = drivers => {}
    }
    info!("the controllers stopped");
}

/// A queue beside the main controller's, running a reconcile for the clusters `queue` names.
struct Lane {
    name: &'static str,
    queue: UnboundedReceiver<Trigger>,
    concurrency: u16,
    /// Set once the clusters' store holds its list: a controller waits for its store to be
    /// ready, and the store's readiness wakes only the last of several waiters, which would
    /// leave the main controller asleep.
    may_start: tokio::sync::watch::Receiver<bool>,
}

impl Lane {
    /// Runs the lane until `stopping` resolves (after the clusters' first list).
    async fn run<Fut>(
        mut self,
        (reader, context, stopping): (
            Store<PostgreSQL>,
            Arc<Context>,
            impl Future<Output = ()> + Send + Sync + 'static,
        ),
        reconcile: impl FnMut(Arc<PostgreSQL>, Arc<Context>) -> Fut,
        error_policy: impl Fn(Arc<PostgreSQL>, &Error, Arc<Context>) -> Action,
    ) where
        Fut: Future<Output = Result<Action, Error>> + Send + 'static,
    {
        if self.may_start.wait_for(|listed| *listed).await.is_err() {
            return;
        }
        let name = self.name;
        let idle = futures::stream::pending::<Result<PostgreSQL, watcher::Error>>();
        Controller::for_stream(idle, reader)
            .with_config(controller::Config::default().concurrency(self.concurrency))
            .reconcile_on(self.queue)
            .graceful_shutdown_on(stopping)
            .run(reconcile, error_policy, context)
            .for_each(|result| async move { log_result(name, result) })
            .await;
    }
}

/// What a change to a PostgreSQL must touch to be reconciled: its spec (the generation) or the
/// switchover request annotation. Status writes touch neither.
fn spec_or_request(pg: &PostgreSQL) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    predicates::generation(pg).hash(&mut hasher);
    pg.annotations()
        .get(SWITCHOVER_ANNOTATION)
        .hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    fn cluster(name: &str, spec: serde_json::Value) -> PostgreSQL {
        crate::crd::fixtures::postgresql("prod", name, spec, serde_json::Value::Null)
    }

    #[test]
    fn a_switchover_request_is_reconciled_and_a_status_write_is_not() {
        let mut pg = cluster("shop", serde_json::json!({"storage": {"size": "1Gi"}}));
        pg.metadata.generation = Some(3);
        let before = spec_or_request(&pg);
        pg.status.get_or_insert_default().current_primary = Some("shop-0".into());
        assert_eq!(
            spec_or_request(&pg),
            before,
            "a status write triggered a reconcile"
        );
        pg.annotations_mut()
            .insert(SWITCHOVER_ANNOTATION.into(), "shop-1".into());
        assert_ne!(spec_or_request(&pg), before);
    }

    #[test]
    fn a_backup_triggers_its_cluster_and_the_clusters_restoring_from_it() {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&Event::Apply(cluster(
            "shop",
            serde_json::json!({"storage": {"size": "1Gi"}}),
        )));
        writer.apply_watcher_event(&Event::Apply(cluster(
            "copy",
            serde_json::json!({"storage": {"size": "1Gi"}, "restore": {"backup": {"name": "nightly"}}}),
        )));
        writer.apply_watcher_event(&Event::Apply(cluster(
            "other",
            serde_json::json!({"storage": {"size": "1Gi"}, "restore": {"backup": {"name": "weekly"}}}),
        )));
        let backup = Backup::of_cluster("nightly", "prod", "shop");
        let mut names: Vec<String> = clusters_of_backup(&backup, &store)
            .into_iter()
            .map(|r| r.name)
            .collect();
        names.sort();
        assert_eq!(names, ["copy", "shop"]);
    }
}
