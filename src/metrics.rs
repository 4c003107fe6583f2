//! Prometheus metrics served on `/metrics`.

use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry, Unit};

use crate::clusters::backup_schedule::freshness::overdue_at;
use crate::crd::{Phase, PostgreSQL};
use crate::resources::tls;
use crate::runtime::secret_facts::SecretStore;
use crate::runtime::watch::owning_cluster;
use k8s_openapi::api::core::v1::Secret;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    namespace: String,
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    kind: String,
    change: String,
}

/// The operator's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    duration: Histogram,
    clusters: Family<PhaseLabels, Gauge>,
    time_to_ready: Histogram,
    child_writes: Family<WriteLabels, Counter>,
    backup_reconciles: Family<ResultLabels, Counter>,
    backups_finished: Family<ResultLabels, Counter>,
    last_backup: Family<ClusterLabels, Gauge>,
    last_verified: Family<ClusterLabels, Gauge>,
    backup_overdue_at: Family<ClusterLabels, Gauge>,
    certificate_expiry: Family<ClusterLabels, Gauge>,
    verifications_finished: Family<ResultLabels, Counter>,
    verification_duration: Histogram,
    failovers: Counter,
    switchovers: Counter,
    failover_seconds: Histogram,
    primary_lane: Counter,
    clusters_reconciled: Gauge,
    /// Hashes of the UIDs of the clusters reconciled since the operator started (8 bytes each:
    /// 80 KiB at 10,000), pruned at every scrape to those still cached.
    reconciled_uids: std::sync::Mutex<HashSet<u64>>,
    /// The controllers' caches of clusters (one per watched scope), recounted at every scrape so
    /// that deleted clusters leave the gauge even though nothing reconciles them.
    cluster_caches: std::sync::Mutex<Vec<kube::runtime::reflector::Store<PostgreSQL>>>,
    /// The caches of the clusters' Secrets, for the server certificates' expiry.
    secret_caches: std::sync::Mutex<Vec<SecretStore>>,
}

/// Registers metrics and hands back the handle the operator updates.
struct Registration<'a>(&'a mut Registry);

impl Registration<'_> {
    fn metric<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        let metric = M::default();
        self.0.register(name, help, metric.clone());
        metric
    }

    fn seconds<M: Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.0
            .register_with_unit(name, help, Unit::Seconds, metric.clone());
        metric
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("tusk");
        let mut add = Registration(&mut registry);
        let reconciles = add.metric("reconcile", "Reconciles of PostgreSQL clusters by result");
        let duration = add.seconds(
            "reconcile_duration",
            "Duration of reconciles",
            Histogram::new(exponential_buckets(0.005, 2.0, 14)),
        );
        let clusters = add.metric("clusters", "PostgreSQL clusters by phase");
        let time_to_ready = add.seconds(
            "time_to_ready",
            "Time from a cluster's creation to its first Ready",
            Histogram::new(exponential_buckets(5.0, 2.0, 12)),
        );
        let child_writes = add.metric("child_writes", "Writes to child objects by kind and change");
        let backup_reconciles = add.metric("backup_reconcile", "Reconciles of Backups by result");
        let backups_finished = add.metric(
            "backups_finished",
            "Backups that reached Completed or Failed, by Failed reason",
        );
        let last_backup = add.seconds(
            "last_successful_backup_timestamp",
            "Unix time of each cluster's newest Completed backup, for alerts on stale backups",
            Family::default(),
        );
        let last_verified = add.seconds(
            "last_verified_backup_timestamp",
            "Unix time of each cluster's newest passed verification, for alerts on unproven backups",
            Family::default(),
        );
        let backup_overdue_at = add.seconds(
            "backup_overdue_timestamp",
            "Unix time at which each scheduled cluster's backups are overdue (about twice the \
             schedule's interval after the last success) unless one succeeds first",
            Family::default(),
        );
        let certificate_expiry = add.seconds(
            "server_certificate_expiry_timestamp",
            "Unix time at which each cluster's server certificate expires (the operator renews it \
             with a third of its life left)",
            Family::default(),
        );
        let verifications_finished = add.metric(
            "verifications_finished",
            "Backup verifications that finished, by result: Verified, the failed check's reason \
             (ChecksumMismatch, CountsDiffer, ...) or VerificationError",
        );
        let verification_duration = add.seconds(
            "verification_duration",
            "Duration of backup verifications (restore into a throwaway server and checks)",
            Histogram::new(exponential_buckets(5.0, 2.0, 12)),
        );
        let failovers = add.metric(
            "failovers",
            "Primary Leases handed to a replica because their holder stopped renewing them",
        );
        let switchovers = add.metric(
            "switchovers",
            "Primary Leases handed to a requested replica after the old primary shut down cleanly",
        );
        let failover_seconds = add.seconds(
            "failover_lease_idle",
            "How long a lost primary's Lease went unrenewed before the handover",
            Histogram::new(exponential_buckets(1.0, 2.0, 8)),
        );
        let primary_lane = add.metric(
            "primary_lane_reconciles",
            "Reconciles taken on the primary lane (a bootstrapped replicated cluster whose primary \
             stopped serving, looked at ahead of the main queue); also counted in tusk_reconcile",
        );
        let clusters_reconciled = add.metric(
            "clusters_reconciled",
            "Clusters reconciled at least once (whatever the result) since the operator started, \
             of those it still watches: equal to the cluster count once a restart has been \
             through every cluster",
        );
        Self {
            registry,
            clusters_reconciled,
            reconciled_uids: std::sync::Mutex::default(),
            failovers,
            switchovers,
            failover_seconds,
            primary_lane,
            verifications_finished,
            verification_duration,
            reconciles,
            duration,
            clusters,
            time_to_ready,
            child_writes,
            backup_reconciles,
            backups_finished,
            last_backup,
            last_verified,
            backup_overdue_at,
            certificate_expiry,
            cluster_caches: std::sync::Mutex::default(),
            secret_caches: std::sync::Mutex::default(),
        }
    }
}

impl Metrics {
    /// One finished reconcile: `result` is `success`, `invalid` or an error reason.
    pub fn reconciled(&self, result: &str, elapsed: Duration) {
        let labels = ResultLabels {
            result: result.to_owned(),
        };
        self.reconciles.get_or_create(&labels).inc();
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// One reconcile taken on the primary lane.
    pub fn primary_lane_reconciled(&self) {
        self.primary_lane.inc();
    }

    /// The cluster with `uid` was reconciled (any result).
    pub fn cluster_reconciled(&self, uid: &str) {
        self.seen().insert(uid_hash(uid));
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.reconciled_uids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts the reconciled clusters among `cached` (by UID) and forgets the others.
    fn count_reconciled<'a>(&self, cached: impl IntoIterator<Item = &'a PostgreSQL>) {
        let cached: HashSet<u64> = cached
            .into_iter()
            .filter_map(|pg| pg.metadata.uid.as_deref().map(uid_hash))
            .collect();
        let mut reconciled = self.seen();
        reconciled.retain(|uid| cached.contains(uid));
        self.clusters_reconciled
            .set(i64::try_from(reconciled.len()).unwrap_or(i64::MAX));
    }

    /// One finished reconcile of a Backup.
    pub fn backup_reconciled(&self, result: &str) {
        let labels = ResultLabels {
            result: result.to_owned(),
        };
        self.backup_reconciles.get_or_create(&labels).inc();
    }

    /// A Backup reached a final phase: `Completed`, or the reason it Failed.
    pub fn backup_finished(&self, result: &str) {
        let labels = ResultLabels {
            result: result.to_owned(),
        };
        self.backups_finished.get_or_create(&labels).inc();
    }

    /// A verification finished with `result` (its condition reason) after `seconds`.
    pub fn verification_finished(&self, result: &str, seconds: Option<f64>) {
        let labels = ResultLabels {
            result: result.to_owned(),
        };
        self.verifications_finished.get_or_create(&labels).inc();
        if let Some(seconds) = seconds {
            self.verification_duration.observe(seconds);
        }
    }

    /// A child object created, updated or deleted.
    pub fn child_written(&self, kind: &str, change: &str) {
        let labels = WriteLabels {
            kind: kind.to_owned(),
            change: change.to_owned(),
        };
        self.child_writes.get_or_create(&labels).inc();
    }

    /// A failover handed the primary Lease on after it went unrenewed for `idle_seconds`.
    pub fn failed_over(&self, idle_seconds: f64) {
        self.failovers.inc();
        self.failover_seconds.observe(idle_seconds);
    }

    /// A requested switchover handed the primary Lease to its target.
    pub fn switched_over(&self) {
        self.switchovers.inc();
    }

    /// A cluster became Ready for the first time, `elapsed` after its creation.
    pub fn first_ready(&self, elapsed: Duration) {
        self.time_to_ready.observe(elapsed.as_secs_f64());
    }

    /// Recounts clusters by phase from the controller's cache.
    pub fn count_phases<'a>(&self, clusters: impl IntoIterator<Item = &'a PostgreSQL>) {
        let mut counts: BTreeMap<&str, i64> =
            ["Pending", "Provisioning", "Ready", "Degraded", "Failed"]
                .map(|p| (p, 0))
                .into();
        for cluster in clusters {
            let phase = match cluster.status.as_ref().and_then(|s| s.phase) {
                None => "Pending",
                Some(Phase::Provisioning) => "Provisioning",
                Some(Phase::Ready) => "Ready",
                Some(Phase::Degraded) => "Degraded",
                Some(Phase::Failed) => "Failed",
            };
            *counts.entry(phase).or_default() += 1;
        }
        for (phase, count) in counts {
            let labels = PhaseLabels {
                phase: phase.to_owned(),
            };
            self.clusters.get_or_create(&labels).set(count);
        }
    }

    /// Sets the last-success and last-verified times of every cluster that has them; clusters
    /// that are gone (or never had one) have no series, so an alert on staleness never sees a
    /// stale value. Likewise the overdue time of every cluster whose schedule is active.
    pub fn record_backup_times<'a>(&self, clusters: impl IntoIterator<Item = &'a PostgreSQL>) {
        self.last_backup.clear();
        self.last_verified.clear();
        self.backup_overdue_at.clear();
        for cluster in clusters {
            let Some(status) = cluster.status.as_ref() else {
                continue;
            };
            let labels = ClusterLabels {
                namespace: cluster.metadata.namespace.clone().unwrap_or_default(),
                cluster: cluster.metadata.name.clone().unwrap_or_default(),
            };
            if let Some(last) = &status.last_successful_backup {
                let at = last.completed_at.0.as_second();
                self.last_backup.get_or_create(&labels).set(at);
            }
            if let Some(verified) = &status.last_verified_backup {
                let at = verified.verified_at.0.as_second();
                self.last_verified.get_or_create(&labels).set(at);
            }
            if let Some(at) = overdue_at(cluster) {
                let at = at.as_second();
                self.backup_overdue_at.get_or_create(&labels).set(at);
            }
        }
    }

    /// Sets the expiry of every server certificate the operator issued (its Secret records it);
    /// a cluster that is gone has no series.
    pub fn record_certificate_expiry<'a>(&self, secrets: impl IntoIterator<Item = &'a Secret>) {
        self.certificate_expiry.clear();
        for secret in secrets {
            // The owner names the cluster: cached Secrets keep no labels.
            let cluster = owning_cluster(secret);
            let (Some(cluster), Some(not_after)) = (cluster, tls::recorded_not_after(secret))
            else {
                continue;
            };
            let labels = ClusterLabels {
                namespace: cluster.namespace.unwrap_or_default(),
                cluster: cluster.name,
            };
            let at = not_after.unix_timestamp();
            self.certificate_expiry.get_or_create(&labels).set(at);
        }
    }

    /// Reports the server certificates among the Secrets of `cache` at every scrape from now on.
    pub fn watch_secrets(&self, cache: SecretStore) {
        self.secret_caches
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(cache);
    }

    /// Counts the clusters of `cache` by phase at every scrape from now on.
    pub fn watch_clusters(&self, cache: kube::runtime::reflector::Store<PostgreSQL>) {
        self.caches().push(cache);
    }

    fn caches(
        &self,
    ) -> std::sync::MutexGuard<'_, Vec<kube::runtime::reflector::Store<PostgreSQL>>> {
        self.cluster_caches
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let clusters: Vec<_> = self.caches().iter().flat_map(|c| c.state()).collect();
        if !self.caches().is_empty() {
            self.count_phases(clusters.iter().map(AsRef::as_ref));
            self.record_backup_times(clusters.iter().map(AsRef::as_ref));
            self.count_reconciled(clusters.iter().map(AsRef::as_ref));
        }
        let secret_caches = (self.secret_caches.lock())
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        if !secret_caches.is_empty() {
            let secrets: Vec<_> = secret_caches
                .iter()
                .flat_map(SecretStore::certificates)
                .collect();
            self.record_certificate_expiry(&secrets);
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// A UID's hash with fixed keys: distinct UIDs of one fleet collide with odds of about
/// n² / 2⁶⁵, and a collision would only make the gauge one short.
fn uid_hash(uid: &str) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(uid)
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
