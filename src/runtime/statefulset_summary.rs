//! The StatefulSet cache as a summary: each StatefulSet's JSON deflated (its pod template and
//! claim template included), with its generation and status beside it as plain values, since
//! readiness and the rollout read them on every reconcile. As reflector objects, even with
//! the pod template packed into an annotation, a StatefulSet held ~9.4 KB of heap (ObjectMeta
//! and claim-template structs, maps of one entry each); packed whole it holds ~1.5 KB. Readers
//! get the object back unpacked ([`StatefulSetStore::object`]), so "already applied?" is still
//! decided on what the server holds.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};

use super::packed::{pack, unpack};
use super::summaries::{Summary, SummaryStore};

#[derive(PartialEq)]
pub struct StatefulSetSummary {
    /// The object's JSON without status and server bookkeeping, deflated.
    packed: Box<[u8]>,
    generation: Option<i64>,
    /// Without its conditions: nothing reads them.
    status: Option<StatefulSetStatus>,
}

impl Summary<StatefulSet> for StatefulSetSummary {
    fn of(object: &StatefulSet) -> Option<Self> {
        Some(Self {
            packed: pack(object)?,
            generation: object.metadata.generation,
            status: object.status.clone().map(|status| StatefulSetStatus {
                conditions: None,
                ..status
            }),
        })
    }
}

pub type StatefulSetStore = SummaryStore<StatefulSet, StatefulSetSummary>;

impl StatefulSetStore {
    /// The StatefulSet `name` in `namespace` as the watch last saw it, unpacked (its uid,
    /// resourceVersion and timestamps left out: nothing reads them). `None` when the watch has
    /// not seen it, or if its entry does not unpack (never: only [`pack`] writes them), which
    /// an apply then treats as a creation and sends.
    pub fn object(&self, namespace: &str, name: &str) -> Option<Arc<StatefulSet>> {
        self.with(namespace, name, |summary| {
            let json = unpack(&summary.packed)?;
            let mut object: StatefulSet = serde_json::from_value(json).ok()?;
            object.metadata.generation = summary.generation;
            object.status.clone_from(&summary.status);
            Some(Arc::new(object))
        })
        .flatten()
    }

    /// Whether the watch has seen `name` in `namespace`.
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.with(namespace, name, |_| ()).is_some()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use serde_json::json;

    use super::*;

    fn statefulset() -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "demo", "namespace": "prod", "generation": 3, "uid": "u",
                "resourceVersion": "42", "labels": {"tusk.dev/cluster": "demo"},
                "managedFields": [{"manager": "tusk-operator"}]},
            "spec": {"replicas": 3, "serviceName": "demo-hl",
                "selector": {"matchLabels": {"tusk.dev/cluster": "demo"}},
                "template": {"metadata": {"labels": {"tusk.dev/cluster": "demo"}},
                    "spec": {"containers": [{"name": "postgres", "image": "postgres:18"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}]},
            "status": {"replicas": 3, "readyReplicas": 2, "observedGeneration": 3,
                "updateRevision": "demo-7d9", "currentRevision": "demo-6c1",
                "conditions": [{"type": "x", "status": "True"}]}
        }))
        .unwrap()
    }

    #[test]
    fn the_object_comes_back_with_what_readers_and_applies_read() {
        let live = statefulset();
        let store = StatefulSetStore::of([live.clone()]);
        let cached = store.object("prod", "demo").unwrap();
        assert_eq!(
            cached.spec, live.spec,
            "the templates, as the server holds them"
        );
        assert_eq!(cached.metadata.labels, live.metadata.labels);
        assert_eq!(cached.metadata.generation, Some(3), "readiness compares it");
        let status = cached.status.as_ref().unwrap();
        assert_eq!(
            (status.ready_replicas, status.update_revision.as_deref()),
            (Some(2), Some("demo-7d9"))
        );
        assert!(status.conditions.is_none());
        assert!(cached.metadata.managed_fields.is_none());
        assert!(store.contains("prod", "demo") && !store.contains("prod", "other"));
        assert!(store.object("other", "demo").is_none());
    }

    #[test]
    fn a_packed_statefulset_is_a_fraction_of_its_json() {
        let mut live = statefulset();
        let containers = (0..4).map(|i| Container {
            name: format!("c{i}"),
            image: Some("postgres:18".into()),
            termination_message_path: Some("/dev/termination-log".into()),
            ..Container::default()
        });
        live.spec.template.spec = Some(PodSpec {
            containers: containers.collect(),
            ..PodSpec::default()
        });
        let json = serde_json::to_vec(&live).unwrap();
        let summary = StatefulSetSummary::of(&live).unwrap();
        assert!(
            summary.packed.len() * 2 < json.len(),
            "{} vs {}",
            summary.packed.len(),
            json.len()
        );
    }
}
