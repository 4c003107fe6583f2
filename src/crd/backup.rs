//! The `Backup` kind: one backup of one cluster, logical or physical, on demand or from its
//! schedule.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::destination::Destination;

/// A backup of a PostgreSQL cluster: a logical dump, or a physical base backup for
/// point-in-time restores. Create one to back up now; the operator also records every scheduled
/// run as a Backup. A Completed Backup can be restored into a new cluster.
// Clippy mistakes repeated `printcolumn(type_ = …)` arguments for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "tusk.dev",
    version = "v1alpha1",
    kind = "Backup",
    plural = "backups",
    singular = "backup",
    shortname = "pgbackup",
    category = "tusk",
    namespaced,
    status = "BackupStatus",
    derive = "PartialEq",
    doc = "A backup of a Tusk PostgreSQL cluster.",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.cluster.name"),
    printcolumn(name = "Method", type_ = "string", json_path = ".spec.method"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Size", type_ = "integer", json_path = ".status.sizeBytes"),
    printcolumn(name = "Completed", type_ = "date", json_path = ".status.completedAt"),
    printcolumn(name = "Verified", type_ = "string", json_path = ".status.verification.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = Rule::new("self.metadata.name.size() <= 63").message("metadata.name must be at most 63 characters: it is also the name of the backup's Job and its backup id"),
    validation = Rule::new("self.metadata.name != 'latest'").message("metadata.name must not be 'latest', which restores use to mean the newest backup")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("a Backup's spec is immutable"))]
pub struct BackupSpec {
    /// The PostgreSQL cluster to back up, in the same namespace.
    pub cluster: ClusterReference,
    /// `logical` (default): `pg_dump` of every database, restorable into any later major.
    /// `physical`: a base backup of the whole server which, with the WAL archive
    /// (`spec.backup.walArchive` of the cluster, required), restores to any point after it.
    #[serde(default)]
    pub method: BackupMethod,
}

/// How a backup copies the database.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackupMethod {
    /// `pg_dump` of every database, with the roles.
    #[default]
    Logical,
    /// `pg_basebackup` of the server; its WAL comes from the archive.
    Physical,
}

/// Where a physical backup sits in its system's WAL, from its manifest: what a point-in-time
/// restore starts from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhysicalRange {
    /// The database system identifier: its WAL is under `wal/<this>/` in the bucket.
    pub system_identifier: String,
    /// The timeline the backup started on.
    #[schemars(schema_with = "timeline_schema")]
    pub timeline: u32,
    /// The WAL position a restore replays from.
    pub start_lsn: String,
    /// The WAL position a restore must reach before it is consistent.
    pub stop_lsn: String,
}

/// A timeline as the API server knows integers: schemars says `format: uint32`, which the
/// API server does not recognise and warns about at every `kubectl apply` of the CRD.
fn timeline_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "integer",
        "format": "int64",
        "minimum": 1,
        "maximum": u32::MAX,
    })
}

/// A PostgreSQL cluster in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
pub struct ClusterReference {
    /// Name of the PostgreSQL.
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(super::rules::name(backup_store::names::CLUSTER)).message("spec.cluster.name must be the name of a PostgreSQL: 1-45 lowercase letters, digits and '-', starting with a letter"))]
    pub name: String,
}

/// Observed state of a Backup, written only by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// Pending, Running, Completed or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupPhase>,
    /// Id of the backup inside the cluster's prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_id: Option<String>,
    /// When the backup Job started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the manifest was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// URL of the backup's prefix, e.g. `s3://bucket/path/<namespace>/<cluster>/<backupId>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Total size of the stored (compressed) files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// SHA-256 of the manifest, which lists the SHA-256 of every file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Version of the server that was dumped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_version: Option<String>,
    /// A physical backup's place in the WAL (absent for logical backups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical: Option<PhysicalRange>,
    /// Why the backup failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Name of the Job that ran the backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The cluster's destination when the backup was taken, so the backup can be restored after
    /// its cluster is gone. Credentials are references to Secrets, never values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<Destination>,
    /// The most recent verification (annotation `tusk.dev/verify` or the cluster's
    /// `spec.backup.verify`): the backup restored into a throwaway server and checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<super::Verification>,
    /// Standard conditions: `Completed` (True once the manifest has been read from the bucket)
    /// and, once verified, `Verified`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Lifecycle of a Backup.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BackupPhase {
    Pending,
    Running,
    Completed,
    Failed,
}

impl BackupPhase {
    /// Completed and Failed never change again.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed)
    }
}

impl Backup {
    /// A Backup named `name` of cluster `cluster` in `namespace`.
    pub fn of_cluster(name: &str, namespace: &str, cluster: &str) -> Self {
        let mut backup = Self::new(
            name,
            BackupSpec {
                cluster: ClusterReference {
                    name: cluster.to_owned(),
                },
                method: BackupMethod::Logical,
            },
        );
        backup.metadata.namespace = Some(namespace.to_owned());
        backup
    }

    /// The phase, `Pending` before the operator has written any status.
    pub fn phase(&self) -> BackupPhase {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or(BackupPhase::Pending)
    }
}
