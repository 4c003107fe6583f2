//! Readiness of a cluster's StatefulSet, the fact both `Ready` and the phase derive from.

use k8s_openapi::api::apps::v1::StatefulSet;

use crate::runtime::database_pods::DatabasePod;

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
    /// From the StatefulSet and the cached database `pods` of the cluster, counted from the
    /// pods themselves as kube-controller-manager counts them: ready instances are its pods
    /// whose Ready condition holds, updated ones those not being deleted and labelled with the
    /// StatefulSet's `updateRevision` (the controller's count of either is used only while the pod cache has
    /// seen none, or the revision is not known yet). The controller writes its counts only on
    /// a later pass over the set, through its client's rate limit: under a burst of 1,000
    /// clusters a cluster's Ready waited 46 s (p50) for that write after its pod was ready
    /// (docs/src/performance/scale.md). Whether the controller has seen the current spec at all
    /// is still its word (the observed generation, with the revision that goes with it).
    pub fn of(statefulset: Option<&StatefulSet>, instances: i32, pods: &[DatabasePod]) -> Self {
        let status = statefulset.and_then(|s| s.status.as_ref());
        let current = statefulset.is_some_and(|s| {
            let observed = s.status.as_ref().and_then(|st| st.observed_generation);
            observed.is_some() && observed >= s.metadata.generation
        });
        let set = statefulset.and_then(|s| s.metadata.name.as_deref());
        let own: Vec<&DatabasePod> = (pods.iter())
            .filter(|p| set.is_some_and(|set| of_set(&p.name, set)))
            .collect();
        // Until the pod cache has seen any of them, the StatefulSet's count.
        let ready_instances = match own.is_empty() {
            true => status.and_then(|s| s.ready_replicas).unwrap_or(0),
            false => i32::try_from(own.iter().filter(|p| p.ready).count()).unwrap_or(i32::MAX),
        };
        let revision = status.and_then(|s| s.update_revision.as_deref());
        let updated = match revision {
            Some(revision) if !own.is_empty() => {
                let labelled = (own.iter())
                    .filter(|p| !p.terminating && p.revision.as_deref() == Some(revision));
                i32::try_from(labelled.count()).unwrap_or(i32::MAX)
            }
            _ => status.and_then(|s| s.updated_replicas).unwrap_or(0),
        };
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

/// Whether pod `name` is one of StatefulSet `set`'s (`<set>-<ordinal>`).
fn of_set(name: &str, set: &str) -> bool {
    (name
        .strip_prefix(set)
        .and_then(|rest| rest.strip_prefix('-')))
    .is_some_and(|ordinal| !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetStatus;

    /// StatefulSet `demo` at `generation`, its controller's `observed` one and `updated`
    /// replicas; its own ready count says none, so only the pods can make it ready.
    fn sts(generation: i64, observed: i64, updated: i32) -> StatefulSet {
        let mut sts = StatefulSet::default();
        sts.metadata.name = Some("demo".into());
        sts.metadata.generation = Some(generation);
        sts.status = Some(StatefulSetStatus {
            observed_generation: Some(observed),
            ready_replicas: Some(0),
            updated_replicas: Some(updated),
            ..StatefulSetStatus::default()
        });
        sts
    }

    fn pod(name: &str, ready: bool) -> DatabasePod {
        DatabasePod {
            name: name.into(),
            ready,
            ..DatabasePod::default()
        }
    }

    #[test]
    fn ready_needs_every_instance_of_the_current_generation_ready() {
        let serving = [pod("demo-0", true)];
        assert!(
            Readiness::of(Some(&sts(2, 2, 1)), 1, &serving).ready,
            "before kube-controller-manager counts the pod ready"
        );
        assert!(
            !Readiness::of(Some(&sts(3, 2, 1)), 1, &serving).ready,
            "stale generation"
        );
        let unready = [pod("demo-0", false)];
        assert!(!Readiness::of(Some(&sts(2, 2, 1)), 1, &unready).ready);
        assert!(
            !Readiness::of(Some(&sts(2, 2, 0)), 1, &serving).ready,
            "old revision"
        );
        assert!(!Readiness::of(None, 1, &serving).ready);
        let rolling = Readiness::of(Some(&sts(3, 2, 1)), 1, &serving);
        assert!(rolling.rolling_out);
        assert_eq!(
            rolling.message(),
            "1/1 instances are ready; the StatefulSet is rolling out the current spec"
        );
        assert_eq!(
            Readiness::of(Some(&sts(2, 2, 1)), 1, &unready).message(),
            "0/1 instances are ready"
        );
    }

    #[test]
    fn updated_instances_are_the_pods_of_the_update_revision() {
        let mut set = sts(2, 2, 0);
        if let Some(status) = set.status.as_mut() {
            status.update_revision = Some("demo-r2".into());
        }
        let revised = |revision: &str| DatabasePod {
            revision: Some(revision.into()),
            ..pod("demo-0", true)
        };
        let ready = Readiness::of(Some(&set), 1, &[revised("demo-r2")]);
        assert!(
            ready.ready,
            "before the controller's second pass counts the pod updated: {ready:?}"
        );
        let old = Readiness::of(Some(&set), 1, &[revised("demo-r1")]);
        assert!(old.rolling_out && !old.ready, "{old:?}");
        let stale = Readiness::of(Some(&sts(3, 2, 1)), 1, &[revised("demo-r2")]);
        assert!(
            stale.rolling_out,
            "a generation the controller has not seen"
        );
        // Scaled from two to one: the pod leaving is on no revision any more.
        let leaving = DatabasePod {
            name: "demo-1".into(),
            terminating: true,
            ready: false,
            ..revised("demo-r2")
        };
        let scaled = Readiness::of(Some(&set), 1, &[revised("demo-r2"), leaving]);
        assert!(scaled.ready, "{scaled:?}");
    }

    #[test]
    fn only_the_sets_own_pods_count() {
        let pods = [
            pod("demo-0", true),
            pod("demo-v18-1", true),
            pod("demo-x", true),
        ];
        let readiness = Readiness::of(Some(&sts(2, 2, 2)), 2, &pods);
        assert_eq!(readiness.ready_instances, 1);
        assert!(!readiness.ready);
        assert!(of_set("demo-12", "demo") && !of_set("demo-", "demo") && !of_set("demo", "demo"));
    }
}
