//! The primary lane: a second queue that runs the same reconcile, only for clusters whose
//! primary needs looking at now. The reconcile runs the primary step first, but its queue is
//! shared by every cluster: a burst of new clusters (a namespace's worth applied at once) or a
//! relist puts a failover's next look behind hundreds of first reconciles, taken in no
//! particular order. This queue gets only the database pod events of a bootstrapped,
//! replicated cluster whose recorded primary stops serving, and its own next looks while the
//! primary step watches a lost primary; the two queues take turns on a cluster
//! (`runtime::cluster_locks`), so a cluster is never reconciled twice at once.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};

use super::ha::pods::is_ready;
use crate::crd::PostgreSQL;
use crate::error::{Error, Result};
use crate::runtime::Context;
use crate::runtime::instances::LeaseClock;
use crate::runtime::watch::{Trigger, labelled_cluster};

/// How soon the lane tries again after a failed reconcile of a cluster it watches.
const RETRY: Duration = Duration::from_secs(1);

/// The lane's reconcile: the cluster's whole reconcile (so the status, the Events and a
/// switchover request are handled exactly as on the main queue), then the lane's own next
/// look — only while the primary step wants one.
pub async fn reconcile(pg: Arc<PostgreSQL>, ctx: Arc<Context>) -> Result<Action> {
    let key = ObjectRef::from_obj(pg.as_ref()).to_string();
    ctx.metrics.primary_lane_reconciled();
    super::reconcile::reconcile_now(pg, ctx.clone()).await?;
    Ok(next_look(&ctx.lease_clock, &key))
}

/// The lane's error policy: look again soon while the primary step watches, else leave the
/// cluster to the main queue (which has its own backoff).
pub fn error_policy(pg: Arc<PostgreSQL>, _error: &Error, ctx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(pg.as_ref()).to_string();
    match ctx.lease_clock.recheck(&key) {
        Some(recheck) => Action::requeue(recheck.min(RETRY)),
        None => Action::await_change(),
    }
}

fn next_look(clock: &LeaseClock, key: &str) -> Action {
    clock
        .recheck(key)
        .map_or_else(Action::await_change, Action::requeue)
}

/// The cluster a database pod's event puts on the lane, if any: one whose recorded primary is
/// this pod and does not serve (not ready, or going away), or whose primary step already
/// watches a lost primary. A cluster that has not bootstrapped, or has one instance, has no
/// failover to make: its pods' events go to the main queue only.
pub fn lane_trigger(
    pod: &Pod,
    clusters: &Store<PostgreSQL>,
    clock: &LeaseClock,
) -> Option<Trigger> {
    let cluster = labelled_cluster(pod)?;
    let pg = clusters.get(&cluster)?;
    concerns_primary(pod, &pg, clock.recheck(&cluster.to_string()).is_some()).then_some(cluster)
}

/// Whether `pod`'s state matters to `pg`'s primary now (`watching`: the primary step asked to
/// look again soon).
fn concerns_primary(pod: &Pod, pg: &PostgreSQL, watching: bool) -> bool {
    let Some(status) = pg.status.as_ref() else {
        return false;
    };
    let bootstrapped = status.system_identifier.is_some() || pg.has_served();
    if pg.spec.instances < 2 || !bootstrapped {
        return false;
    }
    let primary = status.current_primary.as_deref() == Some(pod.name_any().as_str());
    watching || (primary && !is_ready(pod))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::crd::PostgreSQLStatus;

    fn cluster(instances: i32, primary: Option<&str>, system: Option<&str>) -> PostgreSQL {
        let mut pg = PostgreSQL::new(
            "demo",
            serde_json::from_value(serde_json::json!({
                "version": "17", "instances": instances, "storage": {"size": "1Gi"},
            }))
            .unwrap(),
        );
        pg.status = Some(PostgreSQLStatus {
            current_primary: primary.map(str::to_owned),
            system_identifier: system.map(str::to_owned),
            ..PostgreSQLStatus::default()
        });
        pg
    }

    fn pod(name: &str, ready: bool) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_owned());
        pod.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        });
        pod
    }

    #[test]
    fn only_a_lost_primary_of_a_bootstrapped_replicated_cluster_takes_the_lane() {
        let ha = cluster(3, Some("demo-0"), Some("7301"));
        assert!(concerns_primary(&pod("demo-0", false), &ha, false));
        // Its primary serving, a replica changing, or a cluster with nothing to fail over to.
        assert!(!concerns_primary(&pod("demo-0", true), &ha, false));
        assert!(!concerns_primary(&pod("demo-1", false), &ha, false));
        let single = cluster(1, Some("demo-0"), Some("7301"));
        assert!(!concerns_primary(&pod("demo-0", false), &single, false));
        let new = cluster(3, Some("demo-0"), None);
        assert!(!concerns_primary(&pod("demo-0", false), &new, false));
        // A primary going away is not serving, whatever its last condition said.
        let mut leaving = pod("demo-0", true);
        leaving.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert!(concerns_primary(&leaving, &ha, false));
    }

    #[test]
    fn while_the_primary_step_watches_every_pod_of_the_cluster_takes_the_lane() {
        let ha = cluster(3, Some("demo-0"), Some("7301"));
        assert!(concerns_primary(&pod("demo-2", true), &ha, true));
    }
}
