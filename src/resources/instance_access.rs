//! What the instance managers need from the API server, and no more: a ServiceAccount whose Role
//! may read and renew exactly the cluster's primary Lease, and that Lease as the operator first
//! creates it (see docs/src/design/replication.md).

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use super::{Cluster, Component};

pub use tusk_contract::lease::{
    FINAL_LSN as FINAL_LSN_ANNOTATION, HOLDER_ADDRESS as HOLDER_ADDRESS_ANNOTATION,
    LAST_FAILOVER as LAST_FAILOVER_ANNOTATION, MEMBERS as MEMBERS_ANNOTATION,
    SWITCHOVER_ANNOTATIONS as SWITCHOVER_LEASE_ANNOTATIONS,
    SWITCHOVER_FROM as SWITCHOVER_FROM_ANNOTATION,
    SWITCHOVER_STARTED as SWITCHOVER_STARTED_ANNOTATION, SWITCHOVER_TO as SWITCHOVER_ANNOTATION,
    holder_address,
};

/// On a set's Lease emptied by an upgrade's switch: the set that serves from then on. Written in
/// the same write that empties the holder, after the new side finished, so that a reconcile
/// that did not record the switch (the operator restarted, the status write lost) finds it
/// there: no failover of the fenced set, the switch completed without asking it again. The
/// operator's alone (the managers only see an empty holder and fence).
pub const UPGRADE_SWITCHED_TO_ANNOTATION: &str = "tusk.dev/upgrade-switched-to";

/// How long a Lease holder may go without renewing before the operator hands the Lease on (the
/// contract's, as the Lease API spells it).
pub const LEASE_DURATION_SECONDS: i32 = tusk_contract::lease::DURATION_SECONDS as i32;

/// ServiceAccount `<name>-instance`, the identity of the database pods.
pub fn instance_service_account(cluster: &Cluster) -> ServiceAccount {
    ServiceAccount {
        metadata: cluster.child_meta(cluster.instance_account_name(), Component::Database),
        // The token is mounted only into the database pods, which ask for it.
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// Role `<name>-instance`: `get`, `watch` and `update` of the cluster's own Lease, and creating Events
/// (about its pod: promoted, fenced, rewound; creation cannot be limited by name).
pub fn instance_role(cluster: &Cluster) -> Role {
    Role {
        metadata: cluster.child_meta(cluster.instance_account_name(), Component::Database),
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec!["coordination.k8s.io".to_owned()]),
                resources: Some(vec!["leases".to_owned()]),
                // Each set's own, during an upgrade.
                resource_names: Some(cluster.lease_names()),
                // Watched by name: a change of holder or a switchover reaches the manager at
                // once rather than at its next read.
                verbs: ["get", "list", "watch", "update"]
                    .map(str::to_owned)
                    .to_vec(),
                ..PolicyRule::default()
            },
            // The declared roles and databases and the declared passwords' verifiers: those
            // two Secrets, watched by name (a list or watch naming one with a field selector is
            // authorised by name). Verifiers only: no password is in either.
            PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["secrets".to_owned()]),
                resource_names: Some(vec![
                    tusk_contract::declared::secret_name(cluster.name),
                    cluster.verifiers_secret_name(),
                ]),
                verbs: vec!["get".to_owned(), "list".to_owned(), "watch".to_owned()],
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: Some(vec!["events.k8s.io".to_owned()]),
                resources: Some(vec!["events".to_owned()]),
                verbs: vec!["create".to_owned()],
                ..PolicyRule::default()
            },
        ]),
    }
}

/// RoleBinding `<name>-instance` of the Role to the ServiceAccount.
pub fn instance_role_binding(cluster: &Cluster) -> RoleBinding {
    account_binding(
        cluster,
        cluster.instance_account_name(),
        Component::Database,
    )
}

/// RoleBinding `name` of Role `name` to ServiceAccount `name`, all three of `component`.
pub fn account_binding(cluster: &Cluster, name: String, component: Component) -> RoleBinding {
    RoleBinding {
        metadata: cluster.child_meta(name.clone(), component),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name,
            namespace: Some(cluster.namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

/// Lease `<name>-primary` as first created: held by ordinal 0, which initialises the database.
/// Only ever created by the builder's caller; afterwards the holder renews it and the operator
/// hands it over, each with the resourceVersion it read.
pub fn initial_lease(cluster: &Cluster, now: MicroTime) -> Lease {
    let mut metadata = cluster.child_meta(cluster.lease_name(), Component::Database);
    metadata.annotations = Some(BTreeMap::from([(
        MEMBERS_ANNOTATION.to_owned(),
        cluster.pod_names().join(","),
    )]));
    Lease {
        metadata,
        spec: Some(LeaseSpec {
            holder_identity: cluster.pod_names().into_iter().next(),
            lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    fn now() -> MicroTime {
        MicroTime("2026-11-24T08:00:00Z".parse().unwrap())
    }

    #[test]
    fn the_role_grants_its_own_lease_its_declaration_and_creating_events_only() {
        let pg = postgresql(MINIMAL);
        let role = instance_role(&Cluster::new(&pg).unwrap());
        let rules = role.rules.unwrap();
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[2].resources.as_deref(),
            Some(&["events".to_owned()][..])
        );
        assert_eq!(rules[2].verbs, ["create"]);
        assert_eq!(
            rules[1].resource_names.as_deref(),
            Some(&["demo-declared".to_owned(), "demo-verifiers".to_owned()][..]),
            "two Secrets, by name"
        );
        assert_eq!(rules[1].verbs, ["get", "list", "watch"]);
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["leases".to_owned()][..])
        );
        assert_eq!(
            rules[0].resource_names.as_deref(),
            Some(&["demo-primary".to_owned()][..])
        );
        assert_eq!(rules[0].verbs, ["get", "list", "watch", "update"]);
    }

    #[test]
    fn the_binding_names_the_role_and_the_account_in_the_namespace() {
        let pg = postgresql(MINIMAL);
        let binding = instance_role_binding(&Cluster::new(&pg).unwrap());
        assert_eq!(binding.role_ref.name, "demo-instance");
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            ("demo-instance", Some("prod"))
        );
    }

    #[test]
    fn the_lease_annotations_the_operator_writes_are_the_contracts() {
        let contract: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/contracts/instance.json"))
                .expect("tests/contracts/instance.json is JSON");
        let keys = &contract["lease"]["annotations"];
        assert_eq!(keys["members"], MEMBERS_ANNOTATION);
        assert_eq!(keys["switchoverTo"], SWITCHOVER_ANNOTATION);
        assert_eq!(keys["holderAddress"], HOLDER_ADDRESS_ANNOTATION);
        assert_eq!(keys["lastFailover"], LAST_FAILOVER_ANNOTATION);
        assert_eq!(contract["lease"]["durationSeconds"], LEASE_DURATION_SECONDS);
        let address = &contract["lease"]["holderAddress"];
        assert_eq!(address["value"], holder_address("demo-1", "10.0.0.12"));
    }

    #[test]
    fn the_first_lease_is_held_by_ordinal_zero_and_lists_every_member() {
        let pg = postgresql("instances: 3\nstorage: {size: 1Gi}");
        let lease = initial_lease(&Cluster::new(&pg).unwrap(), now());
        assert_eq!(lease.metadata.name.as_deref(), Some("demo-primary"));
        assert_eq!(
            lease.metadata.annotations.unwrap()[MEMBERS_ANNOTATION],
            "demo-0,demo-1,demo-2"
        );
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("demo-0"));
        assert_eq!(spec.lease_duration_seconds, Some(LEASE_DURATION_SECONDS));
        assert_eq!(spec.renew_time, Some(now()));
    }
}
