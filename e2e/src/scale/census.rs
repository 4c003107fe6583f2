//! Counts of what exists, kept by watches (not by polling the API server, which would add to
//! the load being measured): the operator's clusters, how many are ready and where the others
//! are, and the operator's children by kind.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::operators::{Kind, Operator};
use crate::{Context, Result, fail, say};

/// How often the local caches are looked at while waiting.
const LOOK_EVERY: Duration = Duration::from_millis(100);

type Count = Box<dyn Fn() -> usize + Send + Sync>;

/// A line about the run so far, given the counts, said now and then during a long wait.
pub type Progress = Box<dyn Fn(&Counts) -> String + Send + Sync>;

/// What exists, as the watches see it.
pub struct Census {
    operator: Operator,
    clusters: Store<DynamicObject>,
    children: Vec<(&'static str, usize, Count)>,
    watches: Vec<JoinHandle<()>>,
    progress: Option<(Duration, Progress)>,
}

/// One look at the census.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Counts {
    pub clusters: usize,
    pub ready: usize,
    /// Clusters by phase, in the operator's words.
    pub phases: BTreeMap<String, usize>,
    /// Children by kind, in the operator's order: (kind, how many, how many per cluster).
    pub children: Vec<(&'static str, usize, usize)>,
}

impl Counts {
    /// Every kind has at least its per-cluster count times `clusters` children.
    pub fn children_of(&self, clusters: usize) -> bool {
        self.children.iter().all(|(_, n, per)| *n >= per * clusters)
    }

    /// "3 Creating, 97 Running"
    pub fn phases(&self) -> String {
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|(phase, n)| format!("{n} {phase}"))
            .collect();
        phases.join(", ")
    }

    pub fn no_children(&self) -> bool {
        self.children.iter().all(|(_, n, _)| *n == 0)
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} clusters ({})", self.clusters, self.phases())?;
        for (kind, n, _) in &self.children {
            write!(f, ", {n} {kind}")?;
        }
        Ok(())
    }
}

impl Census {
    /// Starts the watches of `operator`'s clusters and children and waits for their first lists.
    pub async fn start(client: &Client, operator: Operator) -> Result<Self> {
        let resource = operator.resource();
        let writer = reflector::store::Writer::new(resource.clone());
        let clusters = writer.as_reader();
        let mut watches = vec![tokio::spawn(
            watcher(
                Api::<DynamicObject>::all_with(client.clone(), &resource),
                Default::default(),
            )
            .default_backoff()
            .reflect(writer)
            .for_each(|_| futures::future::ready(())),
        )];
        let mut children = Vec::new();
        for child in operator.children() {
            let (name, (count, watch)) = match child.kind {
                Kind::StatefulSet => ("StatefulSets", count::<StatefulSet>(client, child.selector)),
                Kind::Service => ("Services", count::<Service>(client, child.selector)),
                Kind::Secret => ("Secrets", count::<Secret>(client, child.selector)),
                Kind::ConfigMap => ("ConfigMaps", count::<ConfigMap>(client, child.selector)),
                Kind::Job => ("Jobs", count::<Job>(client, child.selector)),
                Kind::PersistentVolumeClaim => (
                    "PVCs",
                    count::<PersistentVolumeClaim>(client, child.selector),
                ),
            };
            children.push((name, child.per_cluster, count));
            watches.push(watch);
        }
        let census = Census {
            operator,
            clusters,
            children,
            watches,
            progress: None,
        };
        census
            .clusters
            .wait_until_ready()
            .await
            .context("the clusters' watch ended before its first list")?;
        Ok(census)
    }

    pub fn look(&self) -> Counts {
        let clusters = self.clusters.state();
        let mut phases = BTreeMap::new();
        for cluster in &clusters {
            *phases.entry(self.operator.phase(cluster)).or_insert(0) += 1;
        }
        Counts {
            clusters: clusters.len(),
            ready: clusters.iter().filter(|c| self.operator.ready(c)).count(),
            phases,
            children: self
                .children
                .iter()
                .map(|(k, per, n)| (*k, n(), *per))
                .collect(),
        }
    }

    /// Says `line` of the counts every `every` while a wait goes on (a 10,000-cluster run
    /// takes hours; its course is a finding of its own).
    pub fn report_every(&mut self, every: Duration, line: Progress) {
        self.progress = Some((every, line));
    }

    /// Waits until `done` holds for the counts; how long that took from `since`.
    pub async fn until(
        &self,
        what: &str,
        since: Instant,
        timeout: Duration,
        done: impl Fn(&Counts) -> bool,
    ) -> Result<Duration> {
        let mut said = Instant::now();
        loop {
            let counts = self.look();
            if done(&counts) {
                return Ok(since.elapsed());
            }
            if since.elapsed() > timeout {
                fail!("{what}: not within {timeout:?}; now {counts}");
            }
            if let Some((every, line)) = &self.progress
                && said.elapsed() >= *every
            {
                said = Instant::now();
                let at = since.elapsed().as_secs();
                say(format!("{at} s, waiting for {what}: {}", line(&counts)));
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

/// A metadata-only watch of the operator's children of kind `K` (those `selector` finds), and a
/// way to count them.
fn count<K>(client: &Client, selector: &str) -> (Count, JoinHandle<()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store::<PartialObjectMeta<K>>();
    let config = watcher::Config::default().labels(selector);
    let watch = tokio::spawn(
        watcher(Api::<PartialObjectMeta<K>>::all(client.clone()), config)
            .default_backoff()
            .reflect(writer)
            .for_each(|_| futures::future::ready(())),
    );
    (Box::new(move || reader.state().len()), watch)
}
