//! `spec.pooler`: Deployment `<name>-pooler` running PgBouncer under `tusk-instance pooler`,
//! Service `<name>-pooler-rw`, and an identity that may read the primary Lease and nothing
//! else (docs/src/cluster/pooler.md). The pooler follows the Lease, never a Service address,
//! so that a new server connection can only reach the instance the Lease lets write.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Container, PodSpec, PodTemplateSpec, Probe, SecretVolumeSource, Service, ServiceAccount,
    ServicePort, ServiceSpec, TCPSocketAction, Volume,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::image::{INSTANCE_MANAGER, INSTANCE_MANAGER_DIR, POSTGRES_PORT};
use super::instance_access::account_binding;
use super::pod::{
    AGENT_UID, empty_dir, mount, plain_env, pod_field_env, restricted_container_security,
    restricted_pod_security, spread_over_nodes, tcp_port,
};
use super::postgres_container::installer_container_plain;
use super::{AgentSettings, Cluster, Component};
use crate::crd::PoolerSpec;

/// The PgBouncer image when `spec.pooler.image` is unset: Debian-based, `pgbouncer` on PATH.
pub const DEFAULT_POOLER_IMAGE: &str = "ghcr.io/cloudnative-pg/pgbouncer:1.24.1";
/// The port PgBouncer listens on in the pod (the Service publishes it as 5432).
pub const POOLER_PORT: i32 = 6432;
/// Where the pooler's `/metrics` is served (plain HTTP: counts only).
pub const POOLER_METRICS_PORT: i32 = 9127;
/// Where Secret `<name>-pooler-tls` is mounted.
pub const POOLER_TLS_DIR: &str = "/etc/tusk-pooler-tls";
/// The pooler's working directory: its configuration, auth file and socket (an emptyDir).
pub const POOLER_RUN_DIR: &str = "/run/pooler";

/// Which pooler: the one in front of the primary (`<name>-pooler`, Service `<name>-pooler-rw`)
/// or the read-only one in front of the replicas (`<name>-pooler-ro`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Primary,
    Replicas,
}

impl Side {
    fn component(self) -> Component {
        match self {
            Self::Primary => Component::Pooler,
            Self::Replicas => Component::PoolerReadOnly,
        }
    }

    fn deployment_name(self, cluster: &Cluster) -> String {
        match self {
            Self::Primary => cluster.pooler_name(),
            Self::Replicas => cluster.pooler_ro_name(),
        }
    }

    fn service_name(self, cluster: &Cluster) -> String {
        match self {
            Self::Primary => cluster.pooler_rw_service_name(),
            Self::Replicas => cluster.pooler_ro_name(),
        }
    }
}

/// The pooler's pods: their own component, so no database Service or the StatefulSet selects
/// them, and the operator's pod cache (database pods only) never holds them.
fn pod_labels(cluster: &Cluster, side: Side) -> BTreeMap<String, String> {
    cluster.selector_labels(side.component())
}

/// ServiceAccount `<name>-pooler`.
pub fn pooler_service_account(cluster: &Cluster) -> ServiceAccount {
    ServiceAccount {
        metadata: cluster.child_meta(cluster.pooler_name(), Component::Pooler),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// Role `<name>-pooler`: read and watch the cluster's primary Lease, by name. The pooler
/// decides nothing: it follows whom the Lease names.
pub fn pooler_role(cluster: &Cluster) -> Role {
    Role {
        metadata: cluster.child_meta(cluster.pooler_name(), Component::Pooler),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".to_owned()]),
            resources: Some(vec!["leases".to_owned()]),
            resource_names: Some(vec![cluster.lease_name()]),
            verbs: vec!["get".to_owned(), "list".to_owned(), "watch".to_owned()],
            ..PolicyRule::default()
        }]),
    }
}

/// RoleBinding `<name>-pooler` of the Role to the ServiceAccount.
pub fn pooler_role_binding(cluster: &Cluster) -> RoleBinding {
    account_binding(cluster, cluster.pooler_name(), Component::Pooler)
}

/// Service `<name>-pooler-rw` (or `<name>-pooler-ro`): the pooler pods on PostgreSQL's port.
pub fn pooler_service(cluster: &Cluster, side: Side) -> Service {
    Service {
        metadata: cluster.child_meta(side.service_name(cluster), side.component()),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(pod_labels(cluster, side)),
            ports: Some(vec![ServicePort {
                name: Some("postgres".to_owned()),
                port: POSTGRES_PORT,
                target_port: Some(IntOrString::String("pgbouncer".to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The arguments of `tusk-instance pooler`: every setting is an argument, so a change rolls
/// the Deployment (PgBouncer takes most of them only at start).
fn pooler_command(cluster: &Cluster, pooler: &PoolerSpec, side: Side) -> Vec<String> {
    let mut command = vec![INSTANCE_MANAGER.to_owned(), "pooler".to_owned()];
    for (flag, value) in [
        ("--lease", cluster.lease_name()),
        ("--peer-domain", cluster.peer_domain()),
        ("--pool-mode", pooler.pool_mode.as_str().to_owned()),
        ("--default-pool-size", pooler.default_pool_size.to_string()),
        (
            "--max-client-conn",
            pooler.max_client_connections.to_string(),
        ),
        ("--port", POOLER_PORT.to_string()),
        ("--metrics-port", POOLER_METRICS_PORT.to_string()),
        ("--run-dir", POOLER_RUN_DIR.to_owned()),
        ("--tls-dir", POOLER_TLS_DIR.to_owned()),
    ] {
        command.extend([flag.to_owned(), value]);
    }
    if side == Side::Replicas {
        // The name the instances' certificate carries for `<name>-ro`: verified as any other.
        let ro = format!("{}.{}.svc", cluster.ro_service_name(), cluster.namespace);
        command.extend(["--route-to".to_owned(), ro]);
    }
    command
}

fn pooler_container(cluster: &Cluster, pooler: &PoolerSpec, side: Side) -> Container {
    let port_probe = |period| Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("pgbouncer".to_owned()),
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(period),
        ..Probe::default()
    };
    Container {
        name: "pgbouncer".to_owned(),
        image: Some(
            pooler
                .image
                .clone()
                .unwrap_or_else(|| DEFAULT_POOLER_IMAGE.to_owned()),
        ),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(pooler_command(cluster, pooler, side)),
        env: Some(vec![
            pod_field_env("TUSK_NAMESPACE", "metadata.namespace"),
            pod_field_env("TUSK_POD_NAME", "metadata.name"),
            plain_env("TUSK_CLUSTER", cluster.name),
        ]),
        ports: Some(vec![
            tcp_port("pgbouncer", POOLER_PORT),
            tcp_port("metrics", POOLER_METRICS_PORT),
        ]),
        readiness_probe: Some(port_probe(5)),
        security_context: Some(restricted_container_security()),
        volume_mounts: Some(vec![
            mount("tusk-bin", INSTANCE_MANAGER_DIR, true),
            mount("run", POOLER_RUN_DIR, false),
            mount("tls", POOLER_TLS_DIR, true),
        ]),
        ..Container::default()
    }
}

/// Deployment `<name>-pooler` (or `<name>-pooler-ro`): `spec.pooler.instances` PgBouncer
/// pods, spread over nodes, replaced one at a time with a new one up first (clients of the old
/// one reconnect to it).
pub fn pooler_deployment(
    cluster: &Cluster,
    pooler: &PoolerSpec,
    agent: &AgentSettings,
    side: Side,
) -> Deployment {
    let labels = pod_labels(cluster, side);
    let mut template_labels = cluster.labels(side.component());
    template_labels.extend(labels.clone());
    Deployment {
        metadata: cluster.child_meta(side.deployment_name(cluster), side.component()),
        spec: DeploymentSpec {
            replicas: Some(pooler.instances),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".to_owned()),
                ..DeploymentStrategy::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    labels: Some(template_labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    init_containers: Some(vec![installer_container_plain(agent)]),
                    containers: vec![pooler_container(cluster, pooler, side)],
                    service_account_name: Some(cluster.pooler_name()),
                    // Only the primary's pooler reads the Lease.
                    automount_service_account_token: Some(side == Side::Primary),
                    enable_service_links: Some(false),
                    termination_grace_period_seconds: Some(30),
                    security_context: Some(restricted_pod_security(AGENT_UID, true)),
                    affinity: Some(spread_over_nodes(labels)),
                    volumes: Some(vec![
                        empty_dir("tusk-bin", None),
                        // The auth file holds the admin console's password: memory only.
                        empty_dir("run", Some("Memory")),
                        Volume {
                            name: "tls".to_owned(),
                            secret: Some(SecretVolumeSource {
                                secret_name: Some(cluster.pooler_tls_secret_name()),
                                // Group fsGroup, 0440: PgBouncer reads its key as that group.
                                default_mode: Some(0o440),
                                ..SecretVolumeSource::default()
                            }),
                            ..Volume::default()
                        },
                    ]),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}

#[cfg(test)]
#[path = "pooler_tests.rs"]
mod tests;
