//! What the pod cache keeps of each database pod: its name, the labels the primary step reads
//! (cluster, role, revision, status over TLS), whether it serves, and its IP. Kept as k8s-openapi
//! objects, even with the spec and most of the status dropped, a pod cost ~4.6 KB (the structs
//! are sized for every field a pod can have; ~39 MiB at 10,000 clusters); as facts, a few
//! hundred bytes.

use k8s_openapi::api::core::v1::Pod;

use super::summaries::{Summary, SummaryStore};
use crate::resources::{CLUSTER_LABEL, ROLE_LABEL, STATUS_TLS_LABEL};

/// The label the StatefulSet controller puts on each pod: the revision it was created from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// A database pod as the primary step sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatabasePod {
    pub name: String,
    /// [`CLUSTER_LABEL`].
    pub cluster: Option<String>,
    /// [`ROLE_LABEL`], as last written.
    pub role: Option<String>,
    /// [`REVISION_LABEL`].
    pub revision: Option<String>,
    /// Whether its manager is read over TLS ([`STATUS_TLS_LABEL`]).
    pub status_tls: bool,
    /// Ready, and not being deleted ([`is_ready`]).
    pub ready: bool,
    /// Being deleted: no longer counted as on any revision (as the StatefulSet controller
    /// counts its updated replicas).
    pub terminating: bool,
    pub ip: Option<String>,
}

/// The database pods, as [`DatabasePod`]s.
pub type PodStore = SummaryStore<Pod, DatabasePod>;

impl Summary<Pod> for DatabasePod {
    fn of(pod: &Pod) -> Option<Self> {
        Some(Self::from(pod))
    }
}

impl From<&Pod> for DatabasePod {
    fn from(pod: &Pod) -> Self {
        let labels = pod.metadata.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).cloned();
        Self {
            name: pod.metadata.name.clone().unwrap_or_default(),
            cluster: label(CLUSTER_LABEL),
            role: label(ROLE_LABEL),
            revision: label(REVISION_LABEL),
            status_tls: labels.is_some_and(|l| l.contains_key(STATUS_TLS_LABEL)),
            ready: is_ready(pod),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            ip: pod.status.as_ref().and_then(|s| s.pod_ip.clone()),
        }
    }
}

/// Whether `pod` serves: its Ready condition is true and it is not being deleted.
pub fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;

    fn pod(ready: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "demo-0", "namespace": "prod",
                         "labels": {"tusk.dev/cluster": "demo", "tusk.dev/role": "primary",
                                    "controller-revision-hash": "demo-5d8f",
                                    "tusk.dev/status-tls": "true", "other": "x"},
                         "annotations": {"big": "x"}},
            "spec": {"containers": [{"name": "postgres", "image": "postgres:18"}]},
            "status": {"podIP": "10.0.0.7", "phase": "Running",
                       "conditions": [{"type": "PodScheduled", "status": "True"},
                                      {"type": "Ready", "status": ready}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_keeps_its_name_the_labels_read_readiness_and_ip() {
        assert_eq!(
            DatabasePod::from(&pod("True")),
            DatabasePod {
                name: "demo-0".into(),
                cluster: Some("demo".into()),
                role: Some("primary".into()),
                revision: Some("demo-5d8f".into()),
                status_tls: true,
                ready: true,
                terminating: false,
                ip: Some("10.0.0.7".into()),
            }
        );
        assert!(!DatabasePod::from(&pod("False")).ready);
        let bare = DatabasePod::from(&Pod::default());
        assert_eq!((bare.ready, bare.status_tls, bare.ip), (false, false, None));
    }

    #[test]
    fn a_ready_pod_being_deleted_does_not_serve() {
        let mut leaving = pod("True");
        leaving.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(!is_ready(&leaving));
        assert!(!DatabasePod::from(&leaving).ready);
        assert!(DatabasePod::from(&leaving).terminating);
    }

    #[test]
    fn the_store_finds_pods_by_namespace_and_name() {
        let store = PodStore::of([pod("True")]);
        assert_eq!(
            store.with("prod", "demo-0", |p| p.ip.clone()),
            Some(Some("10.0.0.7".into()))
        );
        assert_eq!(store.with("staging", "demo-0", |p| p.ready), None);
    }
}
