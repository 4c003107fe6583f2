//! What the instance managers need from the API server, and no more: a ServiceAccount whose Role
//! may read and renew exactly the cluster's primary Lease, and that Lease as the operator first
//! creates it (see docs/replication.md).

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use super::{Cluster, Component};

/// How long a Lease holder may go without renewing before the operator hands the Lease on. The
/// holder fences itself 2 s earlier (its renew deadline), so the two never overlap.
pub const LEASE_DURATION_SECONDS: i32 = 6;
/// Lease annotation: the cluster's member pods, comma-separated. The primary keeps a
/// replication slot for each of the others.
pub const MEMBERS_ANNOTATION: &str = "tusk.dev/instances";
/// On the PostgreSQL resource: a request to switch over to this instance. On the Lease: the
/// switchover in progress, which the holder obeys (docs/replication.md).
pub const SWITCHOVER_ANNOTATION: &str = "tusk.dev/switchover-to";
/// On the Lease: the holder when the switchover started.
pub const SWITCHOVER_FROM_ANNOTATION: &str = "tusk.dev/switchover-from";
/// On the Lease: when the switchover started (RFC 3339), for its timeout.
pub const SWITCHOVER_STARTED_ANNOTATION: &str = "tusk.dev/switchover-started";
/// On the Lease, written by the releasing holder: its final checkpoint's LSN.
pub const FINAL_LSN_ANNOTATION: &str = "tusk.dev/final-lsn";
/// On the Lease: `<pod>=<pod IP>` of the holder, written by the operator when it hands the
/// Lease over and by the holder on renew. Standbys dial that IP, so a recreated primary is
/// found at its new address at once (the pod's DNS name can still give the old one).
pub const HOLDER_ADDRESS_ANNOTATION: &str = "tusk.dev/holder-address";

/// On the Lease: the last handover (failover or switchover) as the JSON of the status's
/// `lastFailover`, written by the operator in the same write that changes the holder, so the
/// record survives a status write that is lost or refused.
pub const LAST_FAILOVER_ANNOTATION: &str = "tusk.dev/last-failover";

/// The `HOLDER_ADDRESS_ANNOTATION` value naming `pod` at `ip`.
pub fn holder_address(pod: &str, ip: &str) -> String {
    format!("{pod}={ip}")
}

/// Every Lease annotation of a switchover, removed when it ends.
pub const SWITCHOVER_LEASE_ANNOTATIONS: [&str; 4] = [
    SWITCHOVER_ANNOTATION,
    SWITCHOVER_FROM_ANNOTATION,
    SWITCHOVER_STARTED_ANNOTATION,
    FINAL_LSN_ANNOTATION,
];

/// ServiceAccount `<name>-instance`, the identity of the database pods.
pub fn instance_service_account(cluster: &Cluster) -> ServiceAccount {
    ServiceAccount {
        metadata: cluster.child_meta(cluster.instance_account_name(), Component::Database),
        // The token is mounted only into the database pods, which ask for it.
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// Role `<name>-instance`: `get` and `update` of the cluster's own Lease, and creating Events
/// (about its pod: promoted, fenced, rewound; creation cannot be limited by name).
pub fn instance_role(cluster: &Cluster) -> Role {
    Role {
        metadata: cluster.child_meta(cluster.instance_account_name(), Component::Database),
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec!["coordination.k8s.io".to_owned()]),
                resources: Some(vec!["leases".to_owned()]),
                resource_names: Some(vec![cluster.lease_name()]),
                verbs: vec!["get".to_owned(), "update".to_owned()],
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
    let name = cluster.instance_account_name();
    RoleBinding {
        metadata: cluster.child_meta(name.clone(), Component::Database),
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
    fn the_role_grants_get_and_update_of_its_own_lease_and_creating_events_only() {
        let pg = postgresql(MINIMAL);
        let role = instance_role(&Cluster::new(&pg).unwrap());
        let rules = role.rules.unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules[1].resources.as_deref(),
            Some(&["events".to_owned()][..])
        );
        assert_eq!(rules[1].verbs, ["create"]);
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["leases".to_owned()][..])
        );
        assert_eq!(
            rules[0].resource_names.as_deref(),
            Some(&["demo-primary".to_owned()][..])
        );
        assert_eq!(rules[0].verbs, ["get", "update"]);
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
