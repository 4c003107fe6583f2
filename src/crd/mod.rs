//! The Tusk API (`tusk.dev/v1alpha1`): Rust types that generate the CRDs in `crds/`.
//!
//! Every doc comment here becomes `kubectl explain` text, and every `x_kube(validation)` rule is
//! enforced by the API server at `kubectl apply` time, so a bad spec never reaches the operator.

mod backup;
mod cluster_status;
pub mod conditions;
mod declared;
mod destination;
mod network;
mod parameters;
mod pooler;
mod postgresql;
mod replication;
mod restore_target;
mod rules;
mod services;
mod tls;
mod upgrade_spec;
mod upgrade_status;
mod verification;
mod wal_archive;

pub use backup::{
    Backup, BackupMethod, BackupPhase, BackupSpec, BackupStatus, ClusterReference, PhysicalRange,
};
pub use cluster_status::{
    CertificateTimes, DeclaredObject, Failover, InstanceState, Phase, PostgreSQLStatus,
    RecoveryWindow, RestoredFrom, SecretNames, SuccessfulBackup,
};
pub use declared::{DeclaredDatabase, DeclaredExtension, DeclaredRole, DeclaredSchema, Ensure};
pub use destination::{
    CaBundle, Destination, GcsCredentials, GcsDestination, S3Credentials, S3Destination,
    SecretKeyRef,
};
pub use network::NetworkPolicySpec;
pub use parameters::{
    CODE_RUNNING_PARAMETERS, OPERATOR_OWNED_PARAMETERS, PRELOADABLE_LIBRARIES,
    refusal as parameter_refusal,
};
pub use pooler::{PoolMode, PoolerSpec};
pub use postgresql::{
    BackupPolicy, Bootstrap, Compression, LocalName, MAX_INSTANCES, ObjectStoreRestore, OnDelete,
    PostgreSQL, PostgreSQLSpec, PostgresVersion, RestoreSource, Retention, VolumeSpec,
};
pub use replication::{Durability, Replication, Synchronous};
pub use restore_target::RestoreTarget;
pub use services::{ClientService, ServicesSpec};
pub use tls::TlsSpec;
pub use upgrade_spec::{UpgradeMethod, UpgradeSpec};
pub use upgrade_status::{UpgradePhase, UpgradeStatus};
pub use verification::{
    SCHEDULED_VERIFY_PREFIX, VERIFY_ANNOTATION, Verification, VerificationCheck, VerificationPhase,
    VerifiedBackup, VerifyPolicy, failed_check_reason, last_verified, verify_request,
};
pub use wal_archive::{DEFAULT_ARCHIVE_TIMEOUT_SECONDS, WalArchivePolicy};

/// The API group of every Tusk kind.
pub const GROUP: &str = "tusk.dev";

/// Longest `metadata.name` a PostgreSQL may have: the CronJob `<name>-backup` must leave room for
/// the 11-character suffix Kubernetes appends to its Jobs, and Job names must fit a 63-character
/// label value.
pub const MAX_CLUSTER_NAME_LEN: usize = 45;

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
#[cfg(test)]
mod validation_tests;

/// Finalizer on clusters with a backup destination: deletion waits until `backup.onDelete` has
/// been carried out in the bucket.
pub const CLEANUP_FINALIZER: &str = "tusk.dev/cleanup";

/// Label on the Backups the operator records for scheduled runs.
pub const SCHEDULED_LABEL: &str = "tusk.dev/scheduled";

/// Annotation on a backup CronJob's Job once its run has been recorded as a Backup, so that a
/// Backup later removed by retention is not recorded again.
pub const RECORDED_ANNOTATION: &str = "tusk.dev/recorded-as";
