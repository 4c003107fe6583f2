//! The operators the benchmark measures side by side: Tusk, and its peers the CloudNativePG
//! operator and the Zalando postgres-operator (built by scripts/testbin.sh, run as processes by
//! e2e/local/peer.sh). For each: its cluster resource, the equivalent minimal cluster, what
//! "children exist" and "ready in its own terms" mean, and how a restart is seen to be done.

use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

/// One operator under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Operator {
    #[default]
    Tusk,
    Cnpg,
    Zalando,
}

/// Kinds of children the census counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    StatefulSet,
    Service,
    Secret,
    ConfigMap,
    Job,
    PersistentVolumeClaim,
}

/// Children of one kind: the label selector that finds them and how many each cluster has once
/// the operator has created them.
#[derive(Debug, Clone, Copy)]
pub struct Children {
    pub kind: Kind,
    pub selector: &'static str,
    pub per_cluster: usize,
}

/// How the benchmark sees that a restarted operator has been through every cluster once.
#[derive(Debug, Clone, Copy)]
pub enum Settled {
    /// A gauge on the operator's /metrics of the distinct clusters reconciled since it started.
    Clusters(&'static str),
    /// A counter on the operator's /metrics (a prefix of the series) of reconciles, which cannot
    /// tell clusters apart: reaching the cluster count is a lower bound of the time.
    Reconciles(&'static str),
    /// Lines of the operator's log containing one of `needles`, told apart by the value after
    /// `key` (the cluster's name) where the line has one.
    LogLines {
        needles: &'static [&'static str],
        key: &'static str,
    },
}

impl Settled {
    /// What reaching the cluster count means, for the report.
    pub fn meaning(self) -> &'static str {
        match self {
            Settled::Clusters(_) | Settled::LogLines { .. } => "every cluster reconciled",
            Settled::Reconciles(_) => {
                "as many reconciles as clusters (its counter cannot tell clusters apart)"
            }
        }
    }
}

impl Operator {
    pub fn name(self) -> &'static str {
        match self {
            Operator::Tusk => "Tusk",
            Operator::Cnpg => "CloudNativePG",
            Operator::Zalando => "Zalando postgres-operator",
        }
    }

    /// The ServiceAccount it runs as, as the audit log names it (e2e/local/up.sh's policy).
    pub fn user(self) -> &'static str {
        match self {
            Operator::Tusk => crate::audit::OPERATOR_USER,
            Operator::Cnpg => "system:serviceaccount:cnpg-system:cnpg-manager",
            Operator::Zalando => "system:serviceaccount:default:postgres-operator",
        }
    }

    /// Its cluster resource.
    pub fn resource(self) -> ApiResource {
        let (group, version, kind, plural) = match self {
            Operator::Tusk => ("tusk.dev", "v1alpha1", "PostgreSQL", "postgresqls"),
            Operator::Cnpg => ("postgresql.cnpg.io", "v1", "Cluster", "clusters"),
            Operator::Zalando => ("acid.zalan.do", "v1", "postgresql", "postgresqls"),
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
    }

    /// The equivalent minimal cluster: one instance, 1Gi on the default StorageClass, no
    /// backups, no pooler, no monitoring — the smallest cluster a user of each would run. With
    /// `only_rw` (Tusk only) its one client Service is `-rw`.
    pub fn cluster(self, name: &str, only_rw: bool) -> Value {
        let resource = self.resource();
        let spec = match self {
            // PostgreSQL 18 is Tusk's default major; Tusk has no backups unless asked.
            Operator::Tusk if only_rw => json!({"version": "18", "storage": {"size": "1Gi"},
                "services": {"disabled": ["ro", "r"]}}),
            Operator::Tusk => json!({"version": "18", "storage": {"size": "1Gi"}}),
            // instances 1: a single primary. No `backup`, no `monitoring` (PodMonitor) and no
            // Pooler are set, which is their default; the image is the operator's default.
            Operator::Cnpg => json!({"instances": 1, "storage": {"size": "1Gi"}}),
            // teamId is required by the CRD; numberOfInstances 1: a single primary. No users
            // or databases beyond the operator's own (postgres, standby), no connection pooler
            // and no logical backup (their defaults); version 17 is the default image's.
            Operator::Zalando => json!({"teamId": "scale", "numberOfInstances": 1,
                "volume": {"size": "1Gi"}, "postgresql": {"version": "17"}}),
        };
        json!({"apiVersion": resource.api_version, "kind": resource.kind,
            "metadata": {"name": name}, "spec": spec})
    }

    /// What it creates for a cluster before PostgreSQL runs (counted on the census).
    pub fn children(self) -> Vec<Children> {
        const TUSK: &str = "app.kubernetes.io/managed-by=tusk-operator";
        const CNPG: &str = "cnpg.io/cluster";
        const ZALANDO: &str = "application=spilo";
        let c = |kind, selector, per_cluster| Children {
            kind,
            selector,
            per_cluster,
        };
        match self {
            Operator::Tusk => vec![
                c(Kind::StatefulSet, TUSK, 1),
                c(Kind::Service, TUSK, 2),
                c(Kind::Secret, TUSK, 2),
                c(Kind::ConfigMap, TUSK, 1),
            ],
            // Services rw, ro, r; the app Secret (its certificates' Secrets carry no cluster
            // label); the initdb Job and the primary's PVC.
            Operator::Cnpg => vec![
                c(Kind::Service, CNPG, 3),
                c(Kind::Secret, CNPG, 1),
                c(Kind::Job, CNPG, 1),
                c(Kind::PersistentVolumeClaim, CNPG, 1),
            ],
            // The StatefulSet, Services master and replica, Secrets of users postgres and
            // standby.
            Operator::Zalando => vec![
                c(Kind::StatefulSet, ZALANDO, 1),
                c(Kind::Service, ZALANDO, 2),
                c(Kind::Secret, ZALANDO, 2),
            ],
        }
    }

    /// Ready in the operator's own terms.
    pub fn ready(self, cluster: &DynamicObject) -> bool {
        let status = |pointer: &str| cluster.data.pointer(pointer).cloned();
        match self {
            Operator::Tusk => status("/status/conditions")
                .and_then(|c| c.as_array().cloned())
                .unwrap_or_default()
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True"),
            Operator::Cnpg => {
                status("/status/phase") == Some(json!("Cluster in healthy state"))
                    && status("/status/readyInstances") == Some(json!(1))
            }
            Operator::Zalando => status("/status/PostgresClusterStatus") == Some(json!("Running")),
        }
    }

    /// Where a cluster is, in the operator's words (its phase or status), for "how far it got".
    pub fn phase(self, cluster: &DynamicObject) -> String {
        let pointer = match self {
            Operator::Tusk => "/status/phase",
            Operator::Cnpg => "/status/phase",
            Operator::Zalando => "/status/PostgresClusterStatus",
        };
        let phase = cluster.data.pointer(pointer).and_then(Value::as_str);
        match (self, phase) {
            (Operator::Tusk, _) if self.ready(cluster) => "Ready".into(),
            (Operator::Tusk, _) => "not Ready".into(),
            (_, Some(phase)) => phase.into(),
            (_, None) => "no status".into(),
        }
    }

    /// How a restart is seen to have gone through every cluster.
    pub fn settled(self) -> Settled {
        match self {
            Operator::Tusk => Settled::Clusters("tusk_clusters_reconciled"),
            // controller-runtime's counter of the Cluster controller's reconciles.
            Operator::Cnpg => {
                Settled::Reconciles("controller_runtime_reconcile_total{controller=\"cluster\"")
            }
            // It has no metrics; at start it syncs every cluster once (creates one it had not
            // finished creating) and logs the outcome.
            Operator::Zalando => Settled::LogLines {
                needles: &[
                    "cluster has been synced",
                    "could not sync cluster",
                    "cluster has been created",
                    "could not create cluster",
                ],
                key: "cluster-name=",
            },
        }
    }

    /// The script that manages its process (e2e/local/), and the arguments before the command.
    pub fn script(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Operator::Tusk => ("operator.sh", &[]),
            Operator::Cnpg => ("peer.sh", &["cnpg"]),
            Operator::Zalando => ("peer.sh", &["zalando"]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(op: Operator, status: Value) -> DynamicObject {
        let mut cluster: DynamicObject =
            serde_json::from_value(op.cluster("pg-0", false)).expect("a cluster parses");
        cluster.data["status"] = status;
        cluster
    }

    #[test]
    fn each_operator_is_ready_in_its_own_terms() {
        let cnpg = json!({"phase": "Cluster in healthy state", "readyInstances": 1});
        assert!(Operator::Cnpg.ready(&object(Operator::Cnpg, cnpg)));
        let setting_up = json!({"phase": "Setting up primary", "readyInstances": 0});
        assert!(!Operator::Cnpg.ready(&object(Operator::Cnpg, setting_up.clone())));
        assert_eq!(
            Operator::Cnpg.phase(&object(Operator::Cnpg, setting_up)),
            "Setting up primary"
        );
        let running = json!({"PostgresClusterStatus": "Running"});
        assert!(Operator::Zalando.ready(&object(Operator::Zalando, running)));
        let tusk = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        assert!(Operator::Tusk.ready(&object(Operator::Tusk, tusk)));
        assert_eq!(
            Operator::Zalando.phase(&object(Operator::Zalando, Value::Null)),
            "no status"
        );
    }

    #[test]
    fn tusk_children_are_found_by_the_label_tusk_sets() {
        let selector = format!(
            "app.kubernetes.io/managed-by={}",
            tusk::resources::MANAGED_BY
        );
        assert!(
            Operator::Tusk
                .children()
                .iter()
                .all(|c| c.selector == selector)
        );
    }

    #[test]
    fn every_cluster_names_its_resource() {
        for op in [Operator::Tusk, Operator::Cnpg, Operator::Zalando] {
            let cluster = op.cluster("pg-1", false);
            assert_eq!(cluster["kind"], op.resource().kind);
            assert_eq!(cluster["metadata"]["name"], "pg-1");
        }
    }
}
