//! The PodDisruptionBudget of a replicated cluster: a drain takes at most one instance at a time,
//! so it never takes the primary and a replica together.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Cluster, Component};

/// PodDisruptionBudget `<name>` with `maxUnavailable: 1`; none for a single instance, where it
/// would only block node drains without protecting anything.
pub fn disruption_budget(cluster: &Cluster) -> Option<PodDisruptionBudget> {
    (cluster.spec.instances > 1).then(|| PodDisruptionBudget {
        metadata: cluster.child_meta(cluster.name.to_owned(), Component::Database),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(cluster.selector_labels(Component::Database)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    #[test]
    fn replicated_clusters_lose_at_most_one_instance_to_a_drain() {
        let pg = postgresql("instances: 3\nstorage: {size: 1Gi}");
        let pdb = disruption_budget(&Cluster::new(&pg).unwrap()).unwrap();
        let spec = pdb.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        let selector = spec.selector.unwrap().match_labels.unwrap();
        assert_eq!(selector["app.kubernetes.io/component"], "database");
        assert!(disruption_budget(&Cluster::new(&postgresql(MINIMAL)).unwrap()).is_none());
    }
}
