//! Counts of what exists, kept by watches (not by polling the API server, which would add to
//! the load being measured): the PostgreSQLs, how many are Ready, and Tusk's children by kind.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tusk::crd::PostgreSQL;

use crate::{Context, Result, fail};

/// How often the local caches are looked at while waiting.
const LOOK_EVERY: Duration = Duration::from_millis(100);

type Count = Box<dyn Fn() -> usize + Send + Sync>;

/// What exists, as the watches see it.
pub struct Census {
    clusters: Store<PostgreSQL>,
    children: Vec<(&'static str, Count)>,
    watches: Vec<JoinHandle<()>>,
}

/// One look at the census.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Counts {
    pub clusters: usize,
    pub ready: usize,
    /// Children by kind, in a fixed order (StatefulSet, Service, Secret, ConfigMap).
    pub children: Vec<(&'static str, usize)>,
}

impl Counts {
    /// Every kind has at least `per_cluster[i] * clusters` children.
    pub fn children_of(&self, clusters: usize, per_cluster: &[usize]) -> bool {
        self.children
            .iter()
            .zip(per_cluster)
            .all(|((_, n), per)| *n >= per * clusters)
    }

    pub fn no_children(&self) -> bool {
        self.children.iter().all(|(_, n)| *n == 0)
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} clusters ({} Ready)", self.clusters, self.ready)?;
        for (kind, n) in &self.children {
            write!(f, ", {n} {kind}")?;
        }
        Ok(())
    }
}

impl Census {
    /// Starts the watches and waits for their first lists.
    pub async fn start(client: &Client) -> Result<Self> {
        let (clusters, writer) = reflector::store();
        let mut watches = vec![tokio::spawn(
            watcher(Api::<PostgreSQL>::all(client.clone()), Default::default())
                .default_backoff()
                .reflect(writer)
                .for_each(|_| futures::future::ready(())),
        )];
        let mut children = Vec::new();
        let mut add = |kind, (count, watch)| {
            children.push((kind, count));
            watches.push(watch);
        };
        add("StatefulSets", count::<StatefulSet>(client));
        add("Services", count::<Service>(client));
        add("Secrets", count::<Secret>(client));
        add("ConfigMaps", count::<ConfigMap>(client));
        let census = Census {
            clusters,
            children,
            watches,
        };
        census
            .clusters
            .wait_until_ready()
            .await
            .context("the PostgreSQL watch ended before its first list")?;
        Ok(census)
    }

    pub fn look(&self) -> Counts {
        let clusters = self.clusters.state();
        Counts {
            clusters: clusters.len(),
            ready: clusters.iter().filter(|pg| is_ready(pg)).count(),
            children: self.children.iter().map(|(k, n)| (*k, n())).collect(),
        }
    }

    /// Waits until `done` holds for the counts; how long that took from `since`.
    pub async fn until(
        &self,
        what: &str,
        since: Instant,
        timeout: Duration,
        done: impl Fn(&Counts) -> bool,
    ) -> Result<Duration> {
        loop {
            let counts = self.look();
            if done(&counts) {
                return Ok(since.elapsed());
            }
            if since.elapsed() > timeout {
                fail!("{what}: not within {timeout:?}; now {counts}");
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }
}

impl Drop for Census {
    fn drop(&mut self) {
        self.watches.iter().for_each(JoinHandle::abort);
    }
}

fn is_ready(pg: &PostgreSQL) -> bool {
    pg.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// A metadata-only watch of Tusk's children of kind `K`, and a way to count them.
fn count<K>(client: &Client) -> (Count, JoinHandle<()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store::<PartialObjectMeta<K>>();
    let children = format!(
        "app.kubernetes.io/managed-by={}",
        tusk::resources::MANAGED_BY
    );
    let config = watcher::Config::default().labels(&children);
    let watch = tokio::spawn(
        watcher(Api::<PartialObjectMeta<K>>::all(client.clone()), config)
            .default_backoff()
            .reflect(writer)
            .for_each(|_| futures::future::ready(())),
    );
    (Box::new(move || reader.state().len()), watch)
}
