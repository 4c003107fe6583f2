//! Pure builders: one function per child kind, turning a validated cluster into the exact object
//! the API server should hold. Nothing here touches a client, so every builder is unit-tested on
//! plain values.

mod agent;
pub mod agent_login;
mod archive;
mod base_backup_job;
pub mod brought_tls;
pub mod ca_rotation;
mod config;
mod cronjob;
pub mod declared;
mod disruption;
pub mod endpoints;
mod hba;
pub mod hba_rules;
mod image;
mod in_place_job;
mod instance_access;
mod instance_set;
mod network;
mod pod;
mod point_in_time;
mod pooler;
pub mod pooler_tls;
mod postgres_container;
mod published_ca;
pub mod restore_tls;
mod secret_refs;
mod secrets;
mod server_tools;
mod services;
mod statefulset;
pub mod storage;
pub mod tls;
pub mod upgrade_tls;
pub mod verifiers;
mod verify;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::crd::{PostgreSQL, PostgreSQLSpec};

pub use agent::{
    AGENT_CONTAINER, AgentSettings, Layout, RestorePlan, agent_environment, backup_job,
    backup_job_spec, restore_deadline_seconds, restore_job, store_environment,
};
pub use archive::{WalArchiving, wal_archiving};
pub use base_backup_job::{base_backup_job, base_backup_source, scheduled_base_backup_source};
pub use config::{
    CONFIG_DIR, ParameterError, config_checksum, config_map, hot_standby_values,
    render_postgresql_conf,
};
pub use cronjob::{backup_cronjob, base_backup_cronjob};
pub use disruption::disruption_budget;
pub use hba::render_hba;
pub use image::{
    DATA_MOUNT, INSTANCE_MANAGER, PGDATA, POSTGRES_PORT, default_image, postgres_image,
};
pub use in_place_job::{InPlaceRun, UPGRADE_CONTAINER, in_place_job, in_place_job_name};
pub use instance_access::{
    FINAL_LSN_ANNOTATION, HOLDER_ADDRESS_ANNOTATION, LAST_FAILOVER_ANNOTATION,
    LEASE_DURATION_SECONDS, MEMBERS_ANNOTATION, SWITCHOVER_ANNOTATION, SWITCHOVER_FROM_ANNOTATION,
    SWITCHOVER_LEASE_ANNOTATIONS, SWITCHOVER_STARTED_ANNOTATION, UPGRADE_SWITCHED_TO_ANNOTATION,
    holder_address, initial_lease, instance_role, instance_role_binding, instance_service_account,
};
pub use network::{OPERATOR_POD_LABEL, network_policy};
pub use point_in_time::{PointInTime, point_in_time};
pub use pooler::{
    DEFAULT_POOLER_IMAGE, POOLER_PORT, Side, pooler_deployment, pooler_role, pooler_role_binding,
    pooler_service, pooler_service_account,
};
pub use postgres_container::STATUS_PORT;
pub use published_ca::{published_ca, published_ca_bundle};
pub use secret_refs::{BorrowedSecret, Named as NamedSecret, borrowed, named as named_secrets};
pub use secrets::{
    SSLMODE, STATUS_TOKEN_KEY, SUPERUSER_NAME, app_secret, generate_password, monitoring_secret,
    password_of, replication_secret, superuser_secret, with_ca,
};
pub use services::{
    ROUTED_BY_OPERATOR, ROUTING_ANNOTATION, client_service_names, client_services,
    disabled_client_services, has_client_service, headless_service, rw_service,
};
pub use statefulset::{CONFIG_CHECKSUM_ANNOTATION, statefulset};
pub use verify::{DEFAULT_VERIFY_DEADLINE_SECONDS, VerifyRun, verify_job, verify_job_name};

/// Label the operator keeps on every database pod: `primary` on the Lease holder, `replica` on
/// the others. The `-rw` and `-ro` Services select on it.
pub const ROLE_LABEL: &str = "tusk.dev/role";
pub const ROLE_PRIMARY: &str = "primary";
pub const ROLE_REPLICA: &str = "replica";

/// Label on database pods whose instance manager serves its status port over TLS with the
/// status token (the pods of an earlier Tusk serve plain HTTP until the rollout replaces them).
pub const STATUS_TLS_LABEL: &str = "tusk.dev/status-tls";

/// Label every child carries with the name of its cluster.
pub const CLUSTER_LABEL: &str = "tusk.dev/cluster";
/// Label on the pods of a set not named after its cluster (an upgrade's new set), in its
/// StatefulSet's selector too: two StatefulSets of one cluster must not select each other's
/// pods. The set named after the cluster keeps the selector it always had (selectors are
/// immutable).
pub const INSTANCE_SET_LABEL: &str = "tusk.dev/instance-set";
/// Value of `app.kubernetes.io/managed-by` on every child.
pub const MANAGED_BY: &str = "tusk-operator";

/// Name of the backup CronJob of cluster `cluster`; its Jobs are the scheduled runs.
pub fn backup_cronjob_name(cluster: &str) -> String {
    format!("{cluster}-backup")
}

/// Name of the CronJob of `cluster`'s scheduled base backups (with `walArchive`). A short
/// suffix: a cluster name of 45 characters leaves 7 under the 52 a CronJob name may have.
pub fn base_backup_cronjob_name(cluster: &str) -> String {
    format!("{cluster}-base")
}

/// The CronJob whose runs are the scheduled Backups of `method`.
pub fn scheduled_cronjob_name(cluster: &str, method: crate::crd::BackupMethod) -> String {
    match method {
        crate::crd::BackupMethod::Logical => backup_cronjob_name(cluster),
        crate::crd::BackupMethod::Physical => base_backup_cronjob_name(cluster),
    }
}

/// What a child is for; becomes `app.kubernetes.io/component`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Database,
    Credentials,
    Config,
    Backup,
    Restore,
    Verify,
    Pooler,
    /// The read-only pooler's pods: a component of their own, so the primary's pooler
    /// Service and Deployment never select them.
    PoolerReadOnly,
    /// An in-place upgrade's Job.
    Upgrade,
}

impl Component {
    fn as_str(self) -> &'static str {
        match self {
            Self::Database => "database",
            Self::Credentials => "credentials",
            Self::Config => "config",
            Self::Backup => "backup",
            Self::Restore => "restore",
            Self::Verify => "verify",
            Self::Pooler => "pooler",
            Self::PoolerReadOnly => "pooler-ro",
            Self::Upgrade => "upgrade",
        }
    }
}

/// A cluster whose identity (name, namespace, uid) is known: the input of every builder.
#[derive(Clone, Debug)]
pub struct Cluster<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub spec: &'a PostgreSQLSpec,
    /// The primary as the status last recorded it (`status.currentPrimary`).
    pub primary: Option<&'a str>,
    /// The serving set of instances (`status.instanceSet`, else the cluster's name): the
    /// StatefulSet, its pods `<set>-<ordinal>` and its Lease `<set>-primary`. Every other child
    /// (Secrets, ConfigMaps, Services, the CA) is the cluster's and named after it.
    pub instance_set: &'a str,
    /// A major-version upgrade's new set beside the serving one (`status.upgrade`), until the
    /// switch: its pods are named in the server certificate and may use their own Lease.
    pub incoming_set: Option<&'a str>,
    /// The image the serving set runs when it is not the spec's: during an upgrade, until the
    /// switch, the spec names the new major's.
    pub serving_image: Option<&'a str>,
    /// The major the serving set runs ([`serving_major`]).
    pub serving_major: u32,
    /// An in-place upgrade stopped the set (`status.upgrade`): its StatefulSet has no pods
    /// until the primary's volume is upgraded, or the upgrade failed.
    pub stopped_for_upgrade: bool,
    owner: OwnerReference,
}

/// The image the serving set keeps when it is not the spec's: an upgrade's old set until the
/// switch (`status.upgrade.fromImage`), and, in the reconcile that first sees `spec.version`
/// above the recorded serving major, the recorded image (`status.image`) — the spec names the
/// new major's image from that edit on, and the serving set must never roll onto it.
fn serving_image(pg: &PostgreSQL) -> Option<&str> {
    let status = pg.status.as_ref()?;
    if let Some(upgrade) = status.upgrade.as_ref().filter(|u| u.before_switch()) {
        return Some(&upgrade.from_image);
    }
    let serving = status.version?;
    let declared = i32::try_from(pg.spec.version.major()).ok()?;
    (declared > serving).then_some(status.image.as_deref()?)
}

/// The major the serving set runs: an upgrade's `from` until the switch, else the recorded
/// `status.version` while `spec.version` is above it (the upgrade has not started), else
/// `spec.version` (a new cluster, or one recorded before Tusk recorded the major).
fn serving_major(pg: &PostgreSQL) -> u32 {
    let declared = pg.spec.version.major();
    let Some(status) = pg.status.as_ref() else {
        return declared;
    };
    let recorded = match status.upgrade.as_ref().filter(|u| u.before_switch()) {
        Some(upgrade) => Some(upgrade.from),
        None => status.version,
    };
    recorded
        .and_then(|major| u32::try_from(major).ok())
        .map_or(declared, |major| major.min(declared))
}

/// The cluster object lacks what every child needs to point back at it.
#[derive(Debug, thiserror::Error)]
#[error("PostgreSQL {name} has no {missing}; it must come from the API server")]
pub struct IncompleteObject {
    name: String,
    missing: &'static str,
}

impl<'a> Cluster<'a> {
    /// Borrows the identity of `pg`; fails when it has no namespace or uid.
    pub fn new(pg: &'a PostgreSQL) -> Result<Self, IncompleteObject> {
        let incomplete = |missing| IncompleteObject {
            name: pg.name_any(),
            missing,
        };
        let namespace = pg
            .metadata
            .namespace
            .as_deref()
            .ok_or(incomplete("namespace"))?;
        let owner = pg.controller_owner_ref(&()).ok_or(incomplete("uid"))?;
        let name = pg.metadata.name.as_deref().ok_or(incomplete("name"))?;
        let status = pg.status.as_ref();
        let upgrade = status.and_then(|s| s.upgrade.as_ref());
        Ok(Self {
            name,
            namespace,
            spec: &pg.spec,
            primary: status.and_then(|s| s.current_primary.as_deref()),
            instance_set: status
                .and_then(|s| s.instance_set.as_deref())
                .unwrap_or(name),
            incoming_set: upgrade.and_then(|u| u.incoming_set()),
            serving_image: serving_image(pg),
            serving_major: serving_major(pg),
            stopped_for_upgrade: upgrade.is_some_and(|u| u.set_stopped()),
            owner,
        })
    }

    /// The PostgreSQL's `metadata.uid`: the identity its backups record as their owner.
    pub fn uid(&self) -> &str {
        &self.owner.uid
    }

    /// Labels of every child of this cluster with the given component.
    pub fn labels(&self, component: Component) -> BTreeMap<String, String> {
        let mut labels = self.selector_labels(component);
        labels.insert("app.kubernetes.io/name".into(), "postgresql".into());
        labels.insert("app.kubernetes.io/managed-by".into(), MANAGED_BY.into());
        labels.insert("app.kubernetes.io/part-of".into(), "tusk".into());
        labels
    }

    /// The stable subset of [`Self::labels`] used in selectors (which are immutable).
    pub fn selector_labels(&self, component: Component) -> BTreeMap<String, String> {
        BTreeMap::from([
            (CLUSTER_LABEL.to_owned(), self.name.to_owned()),
            (
                "app.kubernetes.io/instance".to_owned(),
                self.name.to_owned(),
            ),
            (
                "app.kubernetes.io/component".to_owned(),
                component.as_str().to_owned(),
            ),
        ])
    }

    /// Metadata of a child: its name, the namespace, labels and the controller owner reference.
    pub fn child_meta(&self, name: String, component: Component) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.to_owned()),
            labels: Some(self.labels(component)),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }

    /// The owner reference each volume claim carries: the PostgreSQL, neither as controller nor
    /// blocking its deletion (the StatefulSet controller, which creates the claims, may not set
    /// finalizers on a PostgreSQL where owner-reference permissions are enforced).
    pub fn claim_owner(&self) -> OwnerReference {
        OwnerReference {
            controller: None,
            block_owner_deletion: None,
            ..self.owner.clone()
        }
    }

    pub fn superuser_secret_name(&self) -> String {
        format!("{}-superuser", self.name)
    }
    pub fn app_secret_name(&self) -> String {
        format!("{}-app", self.name)
    }
    /// Secret `<name>-verifiers`: the declared passwords' SCRAM verifiers, mounted in the pods.
    pub fn verifiers_secret_name(&self) -> String {
        tusk_contract::roles::verifiers_secret_name(self.name)
    }
    /// The set's ConfigMap (`<set>-config`): an upgrade's new set has its own, so that its
    /// `synchronous_standby_names` never changes the serving set's configuration (a change
    /// there restarts every pod).
    pub fn config_map_name(&self) -> String {
        format!("{}-config", self.instance_set)
    }
    pub fn rw_service_name(&self) -> String {
        format!("{}-rw", self.name)
    }
    pub fn headless_service_name(&self) -> String {
        format!("{}-hl", self.name)
    }
    pub fn cronjob_name(&self) -> String {
        backup_cronjob_name(self.name)
    }
    pub fn restore_job_name(&self) -> String {
        format!("{}-restore", self.name)
    }
    /// Secret `<name>-replication`: the password of role `tusk_replication`, with which
    /// replicas stream from the primary.
    pub fn replication_secret_name(&self) -> String {
        format!("{}-replication", self.name)
    }
    /// Secret `<name>-monitoring`: the status token the instance managers' `/status` and
    /// `/metrics` require (the operator's and a scraper's).
    pub fn monitoring_secret_name(&self) -> String {
        format!("{}-monitoring", self.name)
    }
    /// Secret `<name>-restore-tls`: the superuser's short-lived client certificate, for the
    /// restore Job alone.
    pub fn restore_tls_secret_name(&self) -> String {
        format!("{}-restore-tls", self.name)
    }
    /// Secret `<name>-ca`: the cluster's certificate authority (operator only).
    pub fn ca_secret_name(&self) -> String {
        format!("{}-ca", self.name)
    }
    /// ConfigMap `<name>-ca.crt`: the CA bundle clients trust, without a key (the name follows
    /// the `kube-root-ca.crt` every namespace has).
    pub fn published_ca_name(&self) -> String {
        format!("{}-ca.crt", self.name)
    }
    /// The Secret whose certificate PostgreSQL presents: `spec.tls.serverSecret` when the user
    /// brings one, else `<name>-server-tls`, which the operator issues.
    pub fn server_tls_secret_name(&self) -> String {
        match self.user_server_secret() {
            Some(name) => name.to_owned(),
            None => format!("{}-server-tls", self.name),
        }
    }
    /// `spec.tls.serverSecret`: the server certificate comes from the user, not from Tusk.
    pub fn user_server_secret(&self) -> Option<&str> {
        self.spec.tls.as_ref().map(|tls| tls.server_secret.as_str())
    }
    /// Service `<name>-ro`: the replicas only.
    pub fn ro_service_name(&self) -> String {
        format!("{}-ro", self.name)
    }
    /// Service `<name>-r`: any instance.
    pub fn any_service_name(&self) -> String {
        format!("{}-r", self.name)
    }
    /// Deployment, ServiceAccount, Role and RoleBinding `<name>-pooler`.
    pub fn pooler_name(&self) -> String {
        format!("{}-pooler", self.name)
    }
    /// Service `<name>-pooler-rw`: the pooler in front of the primary.
    pub fn pooler_rw_service_name(&self) -> String {
        format!("{}-pooler-rw", self.name)
    }
    /// Deployment and Service `<name>-pooler-ro`: the read-only pooler, in front of the
    /// replicas.
    pub fn pooler_ro_name(&self) -> String {
        format!("{}-pooler-ro", self.name)
    }
    /// Secret `<name>-pooler-tls`: the pooler's certificate (server and client) and the CA.
    pub fn pooler_tls_secret_name(&self) -> String {
        format!("{}-pooler-tls", self.name)
    }
    /// ServiceAccount, Role and RoleBinding `<name>-instance` of the database pods.
    pub fn instance_account_name(&self) -> String {
        format!("{}-instance", self.name)
    }
    /// The domain under which every database pod has its own DNS name, `<pod>.<domain>`.
    pub fn peer_domain(&self) -> String {
        format!("{}.{}.svc", self.headless_service_name(), self.namespace)
    }
    /// In-cluster DNS name of the read-write Service.
    pub fn rw_host(&self) -> String {
        format!("{}.{}.svc", self.rw_service_name(), self.namespace)
    }
    /// The primary pod's own DNS name (through the headless Service), which serves before the
    /// `-rw` Service routes clients.
    pub fn primary_host(&self) -> String {
        format!(
            "{}-0.{}.{}.svc",
            self.statefulset_name(),
            self.headless_service_name(),
            self.namespace
        )
    }
}

/// Test fixtures shared by the builder tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::crd::PostgreSQL;

    /// A cluster as the API server would hand it to the operator.
    pub fn postgresql(yaml_spec: &str) -> PostgreSQL {
        let spec: serde_json::Value = serde_saphyr::from_str(yaml_spec).expect("test spec is YAML");
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tusk.dev/v1alpha1",
            "kind": "PostgreSQL",
            "metadata": {"name": "demo", "namespace": "prod", "uid": "1234-uid", "generation": 1},
            "spec": spec,
        }))
        .expect("test spec matches the API")
    }

    pub const MINIMAL: &str = "storage: {size: 1Gi}";

    /// A finished Job's status: one True condition `type_` (`Complete` or `Failed`).
    pub fn finished_job_status(
        type_: &str,
        reason: Option<&str>,
        message: Option<&str>,
    ) -> k8s_openapi::api::batch::v1::JobStatus {
        k8s_openapi::api::batch::v1::JobStatus {
            conditions: Some(vec![k8s_openapi::api::batch::v1::JobCondition {
                type_: type_.into(),
                status: "True".into(),
                reason: reason.map(Into::into),
                message: message.map(Into::into),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    /// Nightly backups to MinIO; shared with the mock-API scenarios in tests/.
    pub const WITH_S3_BACKUP: &str = include_str!("../../tests/fixtures/with-s3-backup.yaml");
}

#[cfg(test)]
mod instance_set_tests;

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn children_are_labelled_and_owned_by_the_cluster() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let meta = cluster.child_meta("demo-rw".into(), Component::Database);
        let labels = meta.labels.unwrap();
        assert_eq!(labels["tusk.dev/cluster"], "demo");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "tusk-operator");
        assert_eq!(labels["app.kubernetes.io/component"], "database");
        let owner = &meta.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("PostgreSQL", "demo", "1234-uid")
        );
        assert_eq!(owner.controller, Some(true));
    }

    #[test]
    fn a_cluster_without_uid_is_refused() {
        let mut pg = postgresql(MINIMAL);
        pg.metadata.uid = None;
        let err = Cluster::new(&pg).unwrap_err();
        assert_eq!(
            err.to_string(),
            "PostgreSQL demo has no uid; it must come from the API server"
        );
    }
}
