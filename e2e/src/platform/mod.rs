//! The platform hooks: what a scenario needs from the environment beyond the Kubernetes API.
//! Selected by `E2E_PLATFORM` (`local`: e2e/local's control plane, the default when
//! `TUSK_E2E_DIR` is set; `in-cluster`: the operator as the Deployment of deploy/, e.g. kind;
//! `node`: that Deployment on e2e/local's control plane with its real node, node-run.sh).
//! A hook the platform cannot provide names the [`Level`] it needs ([`Platform::levels`]: what
//! each platform offers).

mod in_cluster;
mod local;

use std::collections::BTreeSet;
use std::path::PathBuf;

use kube::Client;

use crate::audit::Write;
use crate::bucket::Damage;
use crate::settings::Settings;
use crate::{Failure, Level, Result};

pub use in_cluster::{InCluster, NAMESPACE as OPERATOR_NAMESPACE, SELECTOR as OPERATOR_SELECTOR};
pub use local::Local;

pub enum Platform {
    Local(Local),
    InCluster(InCluster),
}

impl Platform {
    pub fn from_env(client: Client, settings: &Settings) -> Self {
        let dir = std::env::var_os("TUSK_E2E_DIR").map(PathBuf::from);
        match (std::env::var("E2E_PLATFORM").as_deref(), dir) {
            (Ok("node"), Some(dir)) => Platform::InCluster(InCluster::local_node(client, dir)),
            (Ok("in-cluster" | "node"), _) | (_, None) => {
                Platform::InCluster(InCluster::new(client))
            }
            (_, Some(dir)) => Platform::Local(Local::new(client, dir, settings)),
        }
    }

    /// SIGKILL the operator (a crash).
    pub async fn operator_kill(&self) -> Result {
        match self {
            Platform::Local(p) => p.operator_kill().await,
            Platform::InCluster(p) => p.operator_kill().await,
        }
    }

    /// Stop the operator until [`Platform::operator_start`] (in a cluster its Deployment
    /// scaled to none: a killed pod would come back at once).
    pub async fn operator_stop(&self, timeout: std::time::Duration) -> Result {
        match self {
            Platform::Local(p) => p.operator_kill().await,
            Platform::InCluster(p) => p.operator_stop(timeout).await,
        }
    }

    /// Bring the operator back and wait until it serves.
    pub async fn operator_start(&self, timeout: std::time::Duration) -> Result {
        match self {
            Platform::Local(p) => p.operator_start().await,
            Platform::InCluster(p) => p.operator_start(timeout).await,
        }
    }

    /// The operator's recent log.
    pub async fn operator_logs(&self) -> Result<String> {
        match self {
            Platform::Local(p) => p.operator_logs(),
            Platform::InCluster(p) => p.operator_logs().await,
        }
    }

    /// The operator's /metrics text.
    pub async fn operator_metrics(&self) -> Result<String> {
        match self {
            Platform::Local(p) => p.operator_metrics().await,
            Platform::InCluster(p) => p.operator_metrics().await,
        }
    }

    /// Where a process on this host scrapes the operator's /metrics (`127.0.0.1:port`).
    pub fn operator_metrics_target(&self) -> Result<String> {
        match self {
            Platform::Local(p) => Ok(format!("127.0.0.1:{}", p.operator_metrics_port()?)),
            Platform::InCluster(_) => Err(unsupported(
                Level::OperatorProcess,
                "reach the operator's metrics port from this host (hook operator_metrics_target)",
            )),
        }
    }

    /// Make a pod unready (false) or ready again (true).
    pub async fn pod_set_ready(&self, ns: &str, pod: &str, ready: bool) -> Result {
        match self {
            Platform::Local(p) => p.pod_set_ready(ns, pod, ready).await,
            Platform::InCluster(p) if p.is_local_node() => p.pod_set_ready(ns, pod, ready).await,
            Platform::InCluster(_) => Err(unsupported(
                Level::OwnControlPlane,
                "make a pod unready (hook pod_set_ready)",
            )),
        }
    }

    /// Freezes (or thaws) the processes of a database pod's `postgres` container.
    pub async fn pod_freeze(&self, ns: &str, pod: &str, frozen: bool) -> Result {
        self.local_node("freeze a pod's processes (hook pod_freeze)")?
            .pod_freeze(ns, pod, frozen)
            .await
    }

    /// Stops (SIGSTOP) or continues the instance manager of a database pod alone: its
    /// postmaster runs on.
    pub async fn pod_freeze_manager(&self, ns: &str, pod: &str, frozen: bool) -> Result {
        self.local_node("stop a pod's instance manager alone (hook pod_freeze_manager)")?
            .pod_freeze_manager(ns, pod, frozen)
            .await
    }

    /// SIGKILL to the instance manager of a database pod (its `postgres` container's PID 1),
    /// which takes every process of the container with it.
    pub async fn pod_kill(&self, ns: &str, pod: &str) -> Result {
        self.local_node("kill a pod's container (hook pod_kill)")?
            .pod_kill(ns, pod)
            .await
    }

    /// Cuts a pod off from the API server (`cut` true), or heals the cut.
    pub async fn pod_cut_from_api_server(&self, ns: &str, pod: &str, cut: bool) -> Result {
        self.local_node("partition a pod (hook pod_cut_from_api_server)")?
            .pod_cut_from_api_server(ns, pod, cut)
            .await
    }

    /// Cuts a pod off from other pods `others` (both ways), or heals the cut.
    pub async fn pod_cut_from_pods(
        &self,
        ns: &str,
        pod: &str,
        others: &[&str],
        cut: bool,
    ) -> Result {
        self.local_node("partition a pod (hook pod_cut_from_pods)")?
            .pod_cut_from_pods(ns, pod, others, cut)
            .await
    }

    /// A mark in the audit trail of the operator's requests.
    pub fn operator_writes_mark(&self) -> Result<u64> {
        match self {
            Platform::Local(p) => p.operator_writes_mark(),
            Platform::InCluster(p) => p.operator_writes_mark().unwrap_or_else(|| {
                Err(unsupported(
                    Level::OwnControlPlane,
                    "keep an audit trail of the operator's requests (hook operator_writes_mark)",
                ))
            }),
        }
    }

    /// The operator's write requests since the mark (Lease renewals excluded).
    pub fn operator_writes_since(&self, mark: u64) -> Result<Vec<Write>> {
        match self {
            Platform::Local(p) => p.operator_writes_since(mark),
            Platform::InCluster(p) => p.operator_writes_since(mark).unwrap_or_else(|| {
                Err(unsupported(
                    Level::OwnControlPlane,
                    "keep an audit trail of the operator's requests",
                ))
            }),
        }
    }

    /// SQL as the superuser in database `db` of a cluster; rows unaligned (`|`), tuples only.
    pub async fn db_sql(&self, ns: &str, cluster: &str, db: &str, sql: &str) -> Result<String> {
        match self {
            Platform::Local(p) => p.db_sql(ns, cluster, Some(db), sql, false).await,
            Platform::InCluster(p) => p.db_sql(ns, cluster, db, sql).await,
        }
    }

    /// SQL as the application owner, with the `<cluster>-app` Secret's credentials.
    pub async fn app_sql(&self, ns: &str, cluster: &str, sql: &str) -> Result<String> {
        match self {
            Platform::Local(p) => p.db_sql(ns, cluster, None, sql, true).await,
            Platform::InCluster(p) => p.app_sql(ns, cluster, sql).await,
        }
    }

    /// Every key under `prefix` in the bucket `tusk-backups` (all pages).
    pub async fn bucket_keys(&self, prefix: &str) -> Result<Vec<String>> {
        match self {
            Platform::Local(p) => p.bucket_keys(prefix).await,
            Platform::InCluster(p) if p.is_local_node() => p.bucket_keys(prefix).await,
            Platform::InCluster(_) => {
                Err(unsupported(Level::OwnControlPlane, "list the object store"))
            }
        }
    }

    /// Damages object `key` in the bucket `tusk-backups`.
    pub async fn bucket_damage(&self, key: &str, damage: Damage<'_>) -> Result {
        match self {
            Platform::Local(p) => p.bucket_damage(key, damage).await,
            Platform::InCluster(p) if p.is_local_node() => p.bucket_damage(key, damage).await,
            Platform::InCluster(_) => Err(unsupported(
                Level::OwnControlPlane,
                "write to the object store",
            )),
        }
    }

    pub fn can_list_bucket(&self) -> bool {
        match self {
            Platform::Local(_) => true,
            Platform::InCluster(p) => p.is_local_node(),
        }
    }

    /// The platform when it is e2e/local's real node, where the suite is root on the node and
    /// can reach into a pod's processes and network namespace; elsewhere a skip naming `what`.
    fn local_node(&self, what: &str) -> Result<&InCluster> {
        match self {
            Platform::InCluster(p) if p.is_local_node() => Ok(p),
            _ => Err(unsupported(Level::Node, what)),
        }
    }

    /// The levels this platform offers (`settings.l4`: the run's Jobs run for real).
    pub fn levels(&self, settings: &Settings) -> BTreeSet<Level> {
        let mut levels: BTreeSet<Level> = match self {
            Platform::Local(_) => [Level::OwnControlPlane, Level::OperatorProcess].into(),
            Platform::InCluster(p) if p.is_local_node() => {
                [Level::Pods, Level::Node, Level::OwnControlPlane].into()
            }
            Platform::InCluster(_) => [Level::Pods].into(),
        };
        if settings.l4 {
            levels.insert(Level::L4);
        }
        if std::env::var_os("TUSK_FAILOVER_TRIALS").is_some() {
            levels.insert(Level::Benchmark);
        }
        levels
    }

    /// Tusk's pods really run (containers, probes, restarts), not kwok's imitation.
    pub fn runs_pods(&self) -> bool {
        matches!(self, Platform::InCluster(_))
    }

    /// The operator runs as a process on this machine, so it reaches the test's loopback.
    pub fn operator_on_this_host(&self) -> bool {
        matches!(self, Platform::Local(_))
    }
}

fn unsupported(level: Level, what: &str) -> Failure {
    Failure::Absent(level, format!("this platform cannot {what}"))
}
