//! How long after its pods a Tusk cluster was Ready, read once every cluster is: per cluster,
//! its Ready condition's transition time minus the latest Ready transition of its database
//! pods, as their writers stamped them at one-second resolution (kwok stamps a pod's when it
//! renders the status, before its patch reaches the API server). What it covers: the pod's
//! status reaching the API server and the operator's watch, kube-controller-manager counting it
//! in the StatefulSet's status (which Ready reads), and the operator's queue.

use std::collections::HashMap;
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use tusk::crd::PostgreSQL;
use tusk::resources::{CLUSTER_LABEL, MANAGED_BY};

use super::ready_waits::ReadyPod;
use crate::Result;
use crate::cluster::{condition, conditions};

/// The lags of every cluster whose Ready and pods' Ready times were both found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadyLag {
    /// Seconds, sorted.
    seconds: Vec<i64>,
    /// Each such cluster's latest-ready pod, for [`super::ready_waits`].
    pub pods: Vec<ReadyPod>,
}

impl ReadyLag {
    /// Reads every PostgreSQL and database pod the client sees (two lists, by the benchmark's
    /// own user: not counted as the operator's requests).
    pub async fn read(client: &Client) -> Result<Self> {
        let pods: Api<Pod> = Api::all(client.clone());
        let database = ListParams::default().labels(&format!(
            "app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component=database"
        ));
        let mut pods_ready: HashMap<(String, String), (i64, String)> = HashMap::new();
        for pod in pods.list(&database).await?.items {
            let (Some(ns), Some(cluster)) =
                (pod.namespace(), pod.labels().get(CLUSTER_LABEL).cloned())
            else {
                continue;
            };
            let ready = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
            let ready =
                ready.and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "True"));
            if let Some(at) = ready.and_then(|c| c.last_transition_time.as_ref()) {
                let latest = (pods_ready.entry((ns, cluster))).or_insert((i64::MIN, String::new()));
                if seconds(at) > latest.0 {
                    *latest = (seconds(at), pod.name_any());
                }
            }
        }
        let clusters: Api<PostgreSQL> = Api::all(client.clone());
        let pairs = clusters
            .list(&ListParams::default())
            .await?
            .items
            .into_iter();
        let mut latest = Vec::new();
        let pairs = pairs.filter_map(|pg| {
            let ready = condition(conditions(&pg), "Ready").filter(|c| c.status == "True")?;
            let (namespace, cluster) = (pg.namespace()?, pg.name_any());
            let (at, pod) = pods_ready.get(&(namespace.clone(), cluster.clone()))?;
            latest.push(ReadyPod {
                namespace,
                cluster,
                pod: pod.clone(),
                ready: *at,
            });
            Some((*at, seconds(&ready.last_transition_time)))
        });
        let pairs: Vec<(i64, i64)> = pairs.collect();
        Ok(Self {
            pods: latest,
            ..Self::of(pairs)
        })
    }

    /// From (pods Ready, cluster Ready) times in seconds.
    pub fn of(pairs: impl IntoIterator<Item = (i64, i64)>) -> Self {
        let mut seconds: Vec<i64> = pairs.into_iter().map(|(pods, pg)| pg - pods).collect();
        seconds.sort_unstable();
        Self {
            seconds,
            pods: Vec::new(),
        }
    }

    /// The lag at quantile `q` (0..=1) of the clusters, nearest rank.
    fn quantile(&self, q: f64) -> Option<i64> {
        let n = self.seconds.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n.max(1));
        self.seconds.get(rank - 1).copied()
    }
}

fn seconds(time: &Time) -> i64 {
    time.0.as_second()
}

impl fmt::Display for ReadyLag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Some(p50), Some(p90), Some(max)) =
            (self.quantile(0.5), self.quantile(0.9), self.quantile(1.0))
        else {
            return f.write_str("no cluster with both times");
        };
        let n = self.seconds.len();
        write!(f, "p50 {p50} s, p90 {p90} s, max {max} s ({n} clusters)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank_over_the_clusters() {
        let lag = ReadyLag::of((0..10).map(|i| (100, 100 + i)));
        assert_eq!(lag.to_string(), "p50 4 s, p90 8 s, max 9 s (10 clusters)");
        assert_eq!(ReadyLag::of([]).to_string(), "no cluster with both times");
        assert_eq!(
            ReadyLag::of([(5, 7)]).to_string(),
            "p50 2 s, p90 2 s, max 2 s (1 clusters)"
        );
    }
}
