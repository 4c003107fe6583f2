//! The build step: every child a cluster wants, computed from the spec alone before anything is
//! applied. Pure — no client — so what Tusk would write is known (and testable) up front.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

use crate::resources::{self, AgentSettings, Cluster, ParameterError, Side};

/// The children of one cluster, in the order they are applied.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The superuser's and the application's credentials, with fresh passwords: created only
    /// when absent; the password is never rewritten.
    pub credentials: [Secret; 2],
    /// The replication role's password: created only when absent, never rewritten.
    pub replication: Secret,
    /// The status token of the instance managers' ports: created only when absent.
    pub monitoring: Secret,
    pub config_map: ConfigMap,
    /// `-rw`, `-ro`, `-r` (those `spec.services` leaves): no selector (their EndpointSlices
    /// are written by `ha::routing`).
    pub clients: Vec<Service>,
    /// The names of the client Services `spec.services` disables: deleted if they exist.
    pub disabled_clients: Vec<String>,
    /// The headless Service: the pods' DNS names.
    pub headless: Service,
    /// The database pods' identity: what their instance managers may do with the API.
    pub access: InstanceAccess,
    pub statefulset: StatefulSet,
    /// A major-version upgrade's new set, while it is wanted beside the serving one: its own
    /// ConfigMap and StatefulSet.
    pub incoming: Option<(ConfigMap, StatefulSet)>,
    /// With more than one instance: at most one of them down for a drain.
    pub disruption_budget: Option<PodDisruptionBudget>,
    /// With `spec.networkPolicy`: ingress only from what needs it.
    pub network_policy: Option<NetworkPolicy>,
    /// The backup CronJob, with `spec.backup` only.
    pub backup: Option<BackupCronJob>,
    /// The base-backup CronJob, with `spec.backup.walArchive` only.
    pub base_backup: Option<BackupCronJob>,
    /// With `spec.pooler`: PgBouncer in front of the primary.
    pub pooler: Option<Pooler>,
}

/// The pooler's children: its identity, its Service and its Deployment.
#[derive(Clone, Debug)]
pub struct Pooler {
    pub service_account: ServiceAccount,
    pub role: Role,
    pub role_binding: RoleBinding,
    pub service: Service,
    pub deployment: Deployment,
    /// With `spec.pooler.readOnly`: the read-only pooler's Service and Deployment.
    pub read_only: Option<(Service, Deployment)>,
}

/// ServiceAccount, Role and RoleBinding `<name>-instance`.
#[derive(Clone, Debug)]
pub struct InstanceAccess {
    pub service_account: ServiceAccount,
    pub role: Role,
    pub role_binding: RoleBinding,
}

/// The backup CronJob in its two states; which one applies is known only once the applied
/// StatefulSet shows whether the database serves.
#[derive(Clone, Debug)]
pub struct BackupCronJob {
    /// While the database serves: scheduled unless the user suspended it.
    pub serving: CronJob,
    /// While it does not: suspended, so no backup starts against it.
    pub held: CronJob,
    /// `spec.backup.suspend`.
    pub suspended_by_user: bool,
}

/// An upgrade's new set: its ConfigMap, and its StatefulSet rolled by that ConfigMap alone.
fn incoming_set(
    set: &Cluster,
    agent: &AgentSettings,
) -> Result<(ConfigMap, StatefulSet), ParameterError> {
    let config_map = resources::config_map(set)?;
    let checksum = resources::config_checksum(&config_map);
    let statefulset = resources::statefulset(set, &checksum, agent);
    Ok((config_map, statefulset))
}

/// Builds every child of `cluster`; refuses parameters that postgresql.conf cannot hold safely.
/// `operator_namespace` is where the operator's pods run (a NetworkPolicy admits them).
pub fn desired(
    cluster: &Cluster,
    agent: &AgentSettings,
    operator_namespace: &str,
) -> Result<Desired, ParameterError> {
    let config_map = resources::config_map(cluster)?;
    let checksum = resources::config_checksum(&config_map);
    Ok(Desired {
        credentials: [
            resources::superuser_secret(cluster, &resources::generate_password()),
            resources::app_secret(cluster, &resources::generate_password()),
        ],
        replication: resources::replication_secret(cluster, &resources::generate_password()),
        monitoring: resources::monitoring_secret(cluster, &resources::generate_password()),
        statefulset: resources::statefulset(cluster, &checksum, agent),
        incoming: match cluster.incoming_set {
            Some(set) => Some(incoming_set(&cluster.set(set), agent)?),
            None => None,
        },
        config_map,
        clients: resources::client_services(cluster),
        disabled_clients: resources::disabled_client_services(cluster),
        headless: resources::headless_service(cluster),
        access: InstanceAccess {
            service_account: resources::instance_service_account(cluster),
            role: resources::instance_role(cluster),
            role_binding: resources::instance_role_binding(cluster),
        },
        disruption_budget: resources::disruption_budget(cluster),
        network_policy: resources::network_policy(cluster, operator_namespace),
        backup: cluster.spec.backup.as_ref().map(|policy| BackupCronJob {
            serving: resources::backup_cronjob(cluster, policy, agent, true),
            held: resources::backup_cronjob(cluster, policy, agent, false),
            suspended_by_user: policy.suspend,
        }),
        pooler: cluster.spec.pooler.as_ref().map(|pooler| Pooler {
            service_account: resources::pooler_service_account(cluster),
            role: resources::pooler_role(cluster),
            role_binding: resources::pooler_role_binding(cluster),
            service: resources::pooler_service(cluster, Side::Primary),
            deployment: resources::pooler_deployment(cluster, pooler, agent, Side::Primary),
            read_only: pooler.read_only.then(|| {
                (
                    resources::pooler_service(cluster, Side::Replicas),
                    resources::pooler_deployment(cluster, pooler, agent, Side::Replicas),
                )
            }),
        }),
        base_backup: cluster.spec.backup.as_ref().and_then(|policy| {
            Some(BackupCronJob {
                serving: resources::base_backup_cronjob(cluster, policy, agent, true)?,
                held: resources::base_backup_cronjob(cluster, policy, agent, false)?,
                suspended_by_user: policy.suspend,
            })
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;
    use kube::ResourceExt;

    #[test]
    fn every_child_is_built_before_anything_is_applied() {
        let agent = AgentSettings {
            image: "ghcr.io/tusk/backup-agent:test".into(),
        };
        let build = |spec| {
            desired(
                &Cluster::new(&postgresql(spec)).unwrap(),
                &agent,
                "tusk-system",
            )
            .unwrap()
        };
        let children = build(WITH_S3_BACKUP);
        let names: Vec<String> = children
            .credentials
            .iter()
            .chain([&children.replication, &children.monitoring])
            .map(ResourceExt::name_any)
            .chain([children.config_map.name_any()])
            .chain(children.clients.iter().map(ResourceExt::name_any))
            .chain([children.headless.name_any()])
            .chain([
                children.access.service_account.name_any(),
                children.access.role.name_any(),
                children.access.role_binding.name_any(),
            ])
            .chain([children.statefulset.name_any()])
            .collect();
        assert_eq!(
            names,
            [
                "demo-superuser",
                "demo-app",
                "demo-replication",
                "demo-monitoring",
                "demo-config",
                "demo-rw",
                "demo-ro",
                "demo-r",
                "demo-hl",
                "demo-instance",
                "demo-instance",
                "demo-instance",
                "demo"
            ]
        );
        let backup = children.backup.expect("spec.backup wants a CronJob");
        let suspend = |c: &CronJob| c.spec.suspend;
        assert_eq!(suspend(&backup.serving), Some(false));
        assert_eq!(suspend(&backup.held), Some(true));
        let plain = postgresql(MINIMAL);
        assert!(
            desired(&Cluster::new(&plain).unwrap(), &agent, "tusk-system")
                .unwrap()
                .backup
                .is_none()
        );
    }
}
