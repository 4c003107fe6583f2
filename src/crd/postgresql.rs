//! The `PostgreSQL` kind: one database server and its backups.

use std::collections::BTreeMap;

use backup_store::names;
use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::PostgreSQLStatus;
use super::destination::Destination;
use super::{parameters, rules};

/// The most instances a cluster may have (the CEL rule on `spec.instances`).
pub const MAX_INSTANCES: i32 = 9;

/// A PostgreSQL server managed by Tusk: a StatefulSet with storage, Services, credentials in
/// Secrets, configuration in a ConfigMap and, optionally, scheduled logical backups.
// Clippy mistakes repeated `printcolumn(type_ = …)` arguments for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "tusk.dev",
    version = "v1alpha1",
    kind = "PostgreSQL",
    plural = "postgresqls",
    singular = "postgresql",
    shortname = "pg",
    category = "tusk",
    namespaced,
    status = "PostgreSQLStatus",
    derive = "PartialEq",
    doc = "A PostgreSQL server managed by Tusk, with optional scheduled logical backups.",
    printcolumn(name = "Version", type_ = "integer", json_path = ".status.version", description = "The major the serving instances run (spec.version above it: an upgrade)"),
    printcolumn(name = "Instances", type_ = "integer", json_path = ".spec.instances"),
    printcolumn(name = "Primary", type_ = "string", json_path = ".status.currentPrimary"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Upgrade", type_ = "string", json_path = ".status.upgrade.phase", description = "The phase of a major-version upgrade in progress", priority = "1"),
    printcolumn(name = "Last Backup", type_ = "date", json_path = ".status.lastSuccessfulBackup.completedAt"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("self.metadata.name.size() <= 45").message("metadata.name must be at most 45 characters, so that the names of its StatefulSet pods, Services and backup Jobs stay valid"),
    validation = Rule::new("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')").message("metadata.name must start with a letter and contain only lowercase letters, digits and '-', because Service names are derived from it"),
    validation = Rule::new("self.spec.version == oldSelf.spec.version || (has(oldSelf.status) && has(oldSelf.status.version) && int(self.spec.version) >= oldSelf.status.version)").message("spec.version can only rise above the major the cluster serves (status.version; a major-version upgrade), or come back to it to cancel an upgrade before its cut-over: a major is never downgraded, and it cannot change before the operator has recorded the serving major")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.roles) || self.roles.all(r, r.name != (has(self.bootstrap) && has(self.bootstrap.owner) ? self.bootstrap.owner : 'app'))").message("spec.roles may not declare the bootstrap owner: its password is the <name>-app Secret's"))]
#[x_kube(validation = Rule::new("!has(self.pooler) || !has(self.tls)").message("spec.pooler needs the certificates Tusk issues (spec.tls unset): the pooler logs in with a client certificate of the cluster's own CA"))]
#[x_kube(validation = Rule::new("!has(self.pooler) || !has(self.pooler.readOnly) || !self.pooler.readOnly || !has(self.services) || !has(self.services.disabled) || !('ro' in self.services.disabled)").message("spec.pooler.readOnly routes to the replicas through <name>-ro: it cannot be in spec.services.disabled"))]
#[x_kube(validation = Rule::new("has(self.restore) == has(oldSelf.restore)").message("spec.restore can only be set when the cluster is created"))]
#[x_kube(validation = Rule::new("!has(self.replication) || !has(self.replication.synchronous) || self.replication.synchronous.number < self.instances").message("spec.replication.synchronous.number must be less than spec.instances: the primary cannot wait for more replicas than the cluster has"))]
pub struct PostgreSQLSpec {
    /// PostgreSQL major version. Increasing it upgrades the cluster online, with a write pause
    /// of seconds (`spec.upgrade`, docs/src/cluster/upgrades.md); lowering it back to the major
    /// still serving cancels an upgrade before its cut-over.
    #[serde(default)]
    pub version: PostgresVersion,

    /// Container image to run instead of the official `postgres:<version>` image. It must be
    /// compatible with the official image (same entrypoint, environment and paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[^\\\\s]+$')").message("spec.image must be an image reference without whitespace"))]
    #[schemars(length(max = 512))]
    pub image: Option<String>,

    /// Number of PostgreSQL instances: one primary and `instances - 1` streaming replicas.
    // 9 is MAX_INSTANCES (a test holds them equal).
    #[serde(default = "default_instances")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 9").message("spec.instances must be between 1 and 9"))]
    pub instances: i32,

    /// How replicas follow the primary (with `instances` > 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<super::Replication>,

    /// Persistent storage for the data directory.
    pub storage: VolumeSpec,

    /// CPU and memory requests and limits of the PostgreSQL container: `cpu`, `memory` and
    /// `ephemeral-storage`, as Kubernetes quantities, each request at most its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "rules::bounded_resources")]
    #[x_kube(validation = Rule::new(rules::resources_names()).message("spec.resources may only name cpu, memory and ephemeral-storage"))]
    #[x_kube(validation = Rule::new(rules::resources_quantities()).message("spec.resources limits and requests must be non-negative Kubernetes quantities such as 500m, 2 or 4Gi"))]
    #[x_kube(validation = Rule::new(rules::RESOURCES_REQUESTS_WITHIN_LIMITS).message("spec.resources.requests must not exceed spec.resources.limits"))]
    pub resources: Option<ResourceRequirements>,

    /// postgresql.conf settings, for example `max_connections: "200"`. Keys Tusk manages itself
    /// (port, listen_addresses, data_directory, hba_file, ident_file, config_file, the
    /// unix_socket_* keys and include directives) are rejected, and so are settings that run
    /// commands or load code (`archive_command`, `restore_command`, `ssl_passphrase_command`,
    /// `dynamic_library_path`, … — docs/src/cluster/parameters.md); `shared_preload_libraries` and
    /// `session_preload_libraries` may list auth_delay, auto_explain, passwordcheck, pg_prewarm
    /// and pg_stat_statements.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[x_kube(validation = Rule::new(parameters::owned_rule()).message(parameters::owned_message().as_str()))]
    #[x_kube(validation = Rule::new(parameters::no_code_running_rule()).message(parameters::code_running_message().as_str()))]
    #[x_kube(validation = Rule::new(parameters::preload_rule()).message(parameters::preload_message().as_str()))]
    #[x_kube(validation = Rule::new(parameters::ha_breaking_rule()).message(parameters::ha_breaking_message().as_str()))]
    #[x_kube(validation = Rule::new(parameters::ha_values_rule()).message(parameters::ha_values_message().as_str()))]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^[a-z][a-z0-9_.]*$'))").message("spec.parameters keys must be postgresql.conf names: lowercase letters, digits, '_' and '.'"))]
    #[x_kube(validation = Rule::new("self.all(k, !self[k].contains('\\n') && !self[k].contains('\\r'))").message("spec.parameters values must be single-line"))]
    #[schemars(schema_with = "bounded_parameters")]
    pub parameters: BTreeMap<String, String>,

    /// The application database and its owner, created when the cluster is first initialised.
    /// Immutable: initdb has run, so a change could not take effect.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.bootstrap cannot be changed: the database and its owner were created when the cluster was initialised"))]
    pub bootstrap: Bootstrap,

    /// Restore a backup into this new cluster. Only at creation; immutable afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.restore is immutable"))]
    pub restore: Option<RestoreSource>,

    /// Scheduled logical backups. The backup CronJob exists only once the cluster is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupPolicy>,

    /// Restrict ingress to the database pods (a NetworkPolicy). Unset: none is made, and one
    /// made before is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<super::NetworkPolicySpec>,

    /// Certificates you bring (cert-manager). Unset: Tusk runs a CA per cluster and issues and
    /// renews the server certificate itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<super::TlsSpec>,

    /// Whether the superuser (`postgres`, Secret `<name>-superuser`) may log in over the
    /// network with its password. Off by default: Tusk's own programs log in as roles of least
    /// privilege (`tusk_replication` replicates and serves rewinds, `tusk_backup` reads for
    /// dumps), the superuser only on the pods' local socket (`kubectl tusk psql`), and a logical
    /// restore with a short-lived client certificate issued for it alone. Changing it rolls the
    /// pods (their `pg_hba.conf` changes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superuser_access: bool,

    /// Your own `pg_hba.conf` rules, such as `hostssl app app 10.0.0.0/8 cert` (an application
    /// role by client certificate). Placed after Tusk's rules, which refuse connections without
    /// TLS and fix how the superuser and Tusk's roles log in, and before the last, which admits
    /// every other role with its password over TLS. `host` or `hostssl` lines only; `trust`,
    /// `password` and `ident` are refused. Changing them rolls the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 512)))]
    #[x_kube(validation = Rule::new("self.all(r, r.matches('^\\\\s*(host|hostssl)\\\\s'))").message("spec.pgHba rules must be host or hostssl lines: connections without TLS are refused before any rule, and the local socket is Tusk's"))]
    #[x_kube(validation = Rule::new("self.all(r, !r.matches('^\\\\s*\\\\S+\\\\s+\\\\S+\\\\s+\\\\S+\\\\s+\\\\S+\\\\s+(\\\\S+\\\\s+)?(trust|password|ident)(\\\\s|#|$)'))").message("spec.pgHba rules may not use trust, password or ident"))]
    pub pg_hba: Vec<String>,

    /// Roles Tusk makes and keeps on the primary: attributes, memberships and a password from
    /// a Secret, put back when changed by hand. docs/src/cluster/roles-and-databases.md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub roles: Vec<super::DeclaredRole>,

    /// Databases Tusk makes and keeps on the primary, with their owner, schemas and extensions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub databases: Vec<super::DeclaredDatabase>,

    /// A PgBouncer pooler in front of the primary (Service `<name>-pooler-rw`) that follows the
    /// primary Lease and holds transactions through a planned switchover instead of failing
    /// them. docs/src/cluster/pooler.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooler: Option<super::PoolerSpec>,
    /// The client Services: `<name>-rw` always, `<name>-ro` and `<name>-r` unless disabled
    /// here (docs/src/cluster/connect.md#only-the-services-you-use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<super::ServicesSpec>,
    /// How an increase of `spec.version` is carried out (docs/src/cluster/upgrades.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<super::UpgradeSpec>,
}

/// At most 64 parameters of at most 1 KiB each: bounds that keep the CEL rules over the map
/// within the API server's cost budget.
fn bounded_parameters(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 64,
        "additionalProperties": {"type": "string", "maxLength": 1024},
    })
}

fn default_instances() -> i32 {
    1
}

/// Supported PostgreSQL major versions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PostgresVersion {
    #[serde(rename = "14")]
    V14,
    #[serde(rename = "15")]
    V15,
    #[serde(rename = "16")]
    V16,
    #[serde(rename = "17")]
    V17,
    #[default]
    #[serde(rename = "18")]
    V18,
}

impl PostgresVersion {
    /// The major version number, e.g. `18`.
    pub fn major(self) -> u32 {
        match self {
            Self::V14 => 14,
            Self::V15 => 15,
            Self::V16 => 16,
            Self::V17 => 17,
            Self::V18 => 18,
        }
    }
}

/// Storage for the data directory, one PersistentVolumeClaim per instance.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)").message("spec.storage.storageClassName cannot be changed: existing volumes cannot move to another StorageClass"))]
pub struct VolumeSpec {
    /// Size of the volume, as a Kubernetes quantity such as `10Gi`. It can grow (the claims are
    /// expanded, where the StorageClass allows it) but never shrink.
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))").message("spec.storage.size must be a positive Kubernetes quantity such as 10Gi"))]
    #[x_kube(validation = Rule::new("!isQuantity(self) || !isQuantity(oldSelf) || !quantity(self).isLessThan(quantity(oldSelf))").message("spec.storage.size cannot shrink: volumes can only grow"))]
    #[schemars(length(max = 32))]
    pub size: String,
    /// StorageClass of the volume; the cluster default when unset, none when empty. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(format!("self == '' || {}", rules::matches(rules::DNS_SUBDOMAIN))).message("spec.storage.storageClassName must be a StorageClass name: lowercase letters, digits, '-' and '.'"))]
    #[schemars(length(max = 253))]
    pub storage_class_name: Option<String>,
}

/// What `initdb` creates besides the superuser.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// Name of the application database.
    #[serde(default = "default_app")]
    #[x_kube(validation = Rule::new("self.matches('^[a-z_][a-z0-9_]{0,62}$') && !(self in ['postgres', 'template0', 'template1'])").message("spec.bootstrap.database must be a lowercase identifier of at most 63 characters, not postgres, template0 or template1"))]
    #[schemars(length(max = 63))]
    pub database: String,
    /// Role that owns the application database; its credentials are in the `<name>-app` Secret.
    #[serde(default = "default_app")]
    #[x_kube(validation = Rule::new("self.matches('^[a-z_][a-z0-9_]{0,62}$') && self != 'postgres' && !self.startsWith('pg_') && !self.startsWith('tusk_')").message("spec.bootstrap.owner must be a lowercase identifier of at most 63 characters, not postgres and not starting with pg_ or tusk_ (tusk_replication streams the replicas; its password is Tusk's)"))]
    #[schemars(length(max = 63))]
    pub owner: String,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Self {
            database: default_app(),
            owner: default_app(),
        }
    }
}

fn default_app() -> String {
    "app".to_owned()
}

/// The backup to restore into a new cluster: exactly one of `backup` or `objectStore`; with
/// `target`, a base backup and the WAL archive to a point in time.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.backup) != has(self.objectStore)").message("spec.restore needs exactly one of backup or objectStore"))]
#[x_kube(validation = Rule::new("!has(self.target) || has(self.objectStore)").message("spec.restore.target (a point-in-time restore) replays the WAL archive of spec.restore.objectStore: name the source there, not with backup"))]
pub struct RestoreSource {
    /// A Completed `Backup` in the same namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<LocalName>,
    /// A backup read straight from a bucket, for when the original cluster and its Backups are gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_store: Option<ObjectStoreRestore>,
    /// How long the restore Job may run before Kubernetes stops it (its `activeDeadlineSeconds`)
    /// and `Restored` turns False; 43200 (12 hours) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 60").message("spec.restore.jobDeadlineSeconds must be at least 60"))]
    pub job_deadline_seconds: Option<i64>,
    /// A point-in-time restore: the first instance unpacks the base backup (`backupId`, or with
    /// `latest` the newest one that can reach the target) and replays the archived WAL to this
    /// point, then promotes. `{}` replays to the end of the archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<super::RestoreTarget>,
}

/// A reference to an object in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
pub struct LocalName {
    /// Name of the object.
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(rules::matches(rules::DNS_SUBDOMAIN)).message("name must be an object name: lowercase letters, digits, '-' and '.'"))]
    pub name: String,
}

/// A backup in an object store, addressed by the cluster that wrote it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStoreRestore {
    /// Where the backups are.
    pub destination: Destination,
    /// Name of the cluster that wrote the backup.
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(rules::name(names::CLUSTER)).message("spec.restore.objectStore.cluster must be the name of a PostgreSQL: at most 45 lowercase letters, digits and '-', starting with a letter"))]
    pub cluster: String,
    /// Namespace of the cluster that wrote the backup; this cluster's namespace when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(rules::name(names::NAMESPACE)).message("spec.restore.objectStore.namespace must be a namespace name: a DNS label of at most 63 characters"))]
    pub namespace: Option<String>,
    /// Backup id to restore, or `latest` for the newest complete backup.
    #[serde(default = "default_latest")]
    #[x_kube(validation = Rule::new(format!("self == 'latest' || ({})", rules::name(names::BACKUP_ID))).message("backupId must be 'latest' or a backup id: at most 128 letters, digits, '.', '-' and '_', starting with a letter or digit"))]
    #[schemars(length(max = 128))]
    pub backup_id: String,
}

fn default_latest() -> String {
    "latest".to_owned()
}

/// Scheduled logical backups with `pg_dump`, streamed to an object store.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupPolicy {
    /// Kubernetes CronJob schedule: five fields (`0 2 * * *`) or a macro such as `@daily`.
    #[x_kube(validation = Rule::new(rules::schedule()).message("spec.backup.schedule must be a Kubernetes CronJob schedule: five fields (minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC, day of week 0-6 or SUN-SAT; Sunday is 0, not 7) or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @every <duration>"))]
    #[schemars(length(max = 128))]
    pub schedule: String,
    /// How many complete backups to keep, and for how long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// Compression of the dump stream.
    #[serde(default)]
    pub compression: Compression,
    /// What happens to this cluster's objects in the bucket when the cluster is deleted.
    #[serde(default)]
    pub on_delete: OnDelete,
    /// Pause scheduled backups without removing the configuration.
    #[serde(default)]
    pub suspend: bool,
    /// How long one backup Job may run before Kubernetes stops it (its `activeDeadlineSeconds`)
    /// and the Backup ends `Failed` with reason `DeadlineExceeded`; 21600 (6 hours) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 60").message("spec.backup.jobDeadlineSeconds must be at least 60"))]
    pub job_deadline_seconds: Option<i64>,
    /// Restore the newest Completed backup into a throwaway server on a schedule and check it;
    /// the proof is in each Backup's `status.verification` and the `BackupVerified` condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<super::VerifyPolicy>,
    /// Continuous WAL archiving into `destination` (`walArchive: {}` turns it on): the base of
    /// point-in-time recovery, losing at most `timeoutSeconds` of commits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal_archive: Option<super::WalArchivePolicy>,
    /// Where backups are written.
    pub destination: Destination,
}

/// Retention of complete backups; the newest complete backup of each method is never deleted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// Keep at most this many complete logical backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1").message("spec.backup.retention.keep must be at least 1"))]
    pub keep: Option<i32>,
    /// Delete logical backups older than this, e.g. `30d`, `12h` or `2w`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]*[hdw]$')").message("spec.backup.retention.maxAge must be a number followed by h, d or w, e.g. 30d"))]
    #[schemars(length(max = 16))]
    pub max_age: Option<String>,
    /// With `walArchive`: every point of this last stretch of time stays restorable, e.g. `7d`.
    /// Base backups older than the newest one before the window, and the archived WAL only
    /// they needed, are deleted together; without it, base backups and WAL are all kept.
    /// `keep` and `maxAge` count logical backups only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]*[hdw]$')").message("spec.backup.retention.recoveryWindow must be a number followed by h, d or w, e.g. 7d"))]
    #[schemars(length(max = 16))]
    pub recovery_window: Option<String>,
}

/// Compression of backup streams.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    Zstd,
    Gzip,
    None,
}

impl Compression {
    /// The agent's `--compression` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Zstd => "zstd",
            Self::Gzip => "gzip",
            Self::None => "none",
        }
    }
}

/// Fate of a cluster's backups when the cluster is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OnDelete {
    /// Keep every object and Backup (default).
    #[default]
    Retain,
    /// Delete exactly this cluster's objects from the bucket, and its Backups.
    Delete,
}

impl PostgreSQL {
    /// Whether the Ready condition is True: the database serves (and is restored, if asked to).
    pub fn is_ready(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == super::conditions::READY && c.status == "True")
        })
    }

    /// Whether the cluster has served: its database was initialised and Ready once. From then
    /// on a cluster that does not serve is Degraded (not Provisioning), a missing Secret is one
    /// the database still knows the old password of, and a lost primary is failed over.
    pub fn has_served(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(PostgreSQLStatus::has_served)
    }
}
