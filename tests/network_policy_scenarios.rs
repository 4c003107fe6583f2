//! Mock-API scenarios for `spec.networkPolicy`: the NetworkPolicy is applied while asked for,
//! left alone once converged, and deleted when the field goes.

mod support;

use support::paths::NETWORK_POLICIES;
use support::run::scenario;
use support::verifier::{self, Expect};
use support::world::*;
use tusk::clusters::status::BackupSchedule;

const WITH_POLICY: &str = "storage: {size: 1Gi}\nnetworkPolicy: {}";

#[tokio::test]
async fn asking_for_a_network_policy_applies_it() {
    let (mut pg, cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    pg.spec.network_policy = postgresql(WITH_POLICY).spec.network_policy;
    let script = vec![
        Expect::apply(format!("{NETWORK_POLICIES}/demo")),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    let policy = &seen[0].body;
    assert_eq!(policy["spec"]["policyTypes"][0], "Ingress");
    assert_eq!(
        policy["metadata"]["ownerReferences"][0]["kind"],
        "PostgreSQL"
    );
    assert_eq!(seen[1].body["note"], "Created NetworkPolicy demo");
}

#[tokio::test]
async fn a_converged_network_policy_is_not_written_again() {
    let (pg, cache) = converged(WITH_POLICY, true, BackupSchedule::NotConfigured);
    let (_, seen) = scenario(pg, cache, vec![]).await;
    assert_eq!(verifier::writes(&seen).len(), 0);
}

#[tokio::test]
async fn removing_the_field_deletes_the_network_policy() {
    let (mut pg, cache) = converged(WITH_POLICY, true, BackupSchedule::NotConfigured);
    pg.spec.network_policy = None;
    let script = vec![
        Expect::delete(format!("{NETWORK_POLICIES}/demo")),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    assert_eq!(seen[1].body["note"], "Deleted NetworkPolicy demo");
}
