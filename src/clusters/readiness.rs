//! Readiness of a cluster's StatefulSet, the fact both `Ready` and the phase derive from.

use k8s_openapi::api::apps::v1::StatefulSet;

/// Readiness of the StatefulSet: `ready` only when every instance of the current generation
/// passes its readiness probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub instances: i32,
    pub ready_instances: i32,
    pub ready: bool,
    /// The StatefulSet controller has not yet rolled out the current spec to every instance.
    pub rolling_out: bool,
}

impl Readiness {
    pub fn of(statefulset: Option<&StatefulSet>, instances: i32) -> Self {
        let status = statefulset.and_then(|s| s.status.as_ref());
        let ready_instances = status.and_then(|s| s.ready_replicas).unwrap_or(0);
        let current = statefulset.is_some_and(|s| {
            let observed = s.status.as_ref().and_then(|st| st.observed_generation);
            observed.is_some() && observed >= s.metadata.generation
        });
        let updated = status.and_then(|s| s.updated_replicas).unwrap_or(0);
        let rolling_out = statefulset.is_some() && (!current || updated != instances);
        Self {
            instances,
            ready_instances,
            ready: !rolling_out && statefulset.is_some() && ready_instances == instances,
            rolling_out,
        }
    }

    /// A sentence for conditions and Events.
    pub fn message(&self) -> String {
        let counts = format!(
            "{}/{} instances are ready",
            self.ready_instances, self.instances
        );
        if self.rolling_out {
            format!("{counts}; the StatefulSet is rolling out the current spec")
        } else {
            counts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetStatus;

    fn sts(generation: i64, observed: i64, ready: i32, updated: i32) -> StatefulSet {
        let mut sts = StatefulSet::default();
        sts.metadata.generation = Some(generation);
        sts.status = Some(StatefulSetStatus {
            observed_generation: Some(observed),
            ready_replicas: Some(ready),
            updated_replicas: Some(updated),
            ..StatefulSetStatus::default()
        });
        sts
    }

    #[test]
    fn ready_needs_every_instance_of_the_current_generation() {
        assert!(Readiness::of(Some(&sts(2, 2, 1, 1)), 1).ready);
        assert!(
            !Readiness::of(Some(&sts(3, 2, 1, 1)), 1).ready,
            "stale generation"
        );
        assert!(
            !Readiness::of(Some(&sts(2, 2, 0, 1)), 1).ready,
            "pod not ready"
        );
        assert!(
            !Readiness::of(Some(&sts(2, 2, 1, 0)), 1).ready,
            "old revision"
        );
        assert!(!Readiness::of(None, 1).ready);
        let rolling = Readiness::of(Some(&sts(3, 2, 1, 1)), 1);
        assert!(rolling.rolling_out);
        assert_eq!(
            rolling.message(),
            "1/1 instances are ready; the StatefulSet is rolling out the current spec"
        );
        assert_eq!(
            Readiness::of(Some(&sts(2, 2, 0, 1)), 1).message(),
            "0/1 instances are ready"
        );
    }
}
