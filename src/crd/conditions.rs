//! Condition types of Tusk's kinds: part of the API (`kubectl wait --for=condition=…`).

/// A PostgreSQL: every instance serves (and, with `spec.restore`, the restore has finished).
pub const READY: &str = "Ready";
/// A PostgreSQL: where its backup schedule stands.
pub const BACKUP_SCHEDULED: &str = "BackupScheduled";
/// A PostgreSQL with `spec.restore`: the backup has been restored.
pub const RESTORED: &str = "Restored";
/// A PostgreSQL: whether the most recent backup to finish succeeded.
pub const LAST_BACKUP_SUCCEEDED: &str = "LastBackupSucceeded";
/// A PostgreSQL whose `spec.storage.size` grew: whether every volume has the new size.
pub const STORAGE_RESIZED: &str = "StorageResized";
/// A PostgreSQL being deleted: False while `backup.onDelete: Delete` waits for the bucket.
pub const CLEANUP: &str = "Cleanup";
/// A Backup: its manifest was read from the bucket.
pub const COMPLETED: &str = "Completed";
/// A Backup: its most recent verification passed (False names the failed check).
pub const VERIFIED: &str = "Verified";
/// A PostgreSQL with `spec.backup.verify`: a verification passed within the window and the most
/// recent one did not fail.
pub const BACKUP_VERIFIED: &str = "BackupVerified";
/// A PostgreSQL with `spec.backup.walArchive`: its primary archives WAL (False while uploads fail).
pub const CONTINUOUS_ARCHIVING: &str = "ContinuousArchiving";
/// A PostgreSQL with `spec.roles` or `spec.databases`: every declared object is kept as declared
/// on the primary (False while one is pending or failed, with the reason).
pub const DECLARED: &str = "Declared";

/// A major-version upgrade: True while one moves (its phase as the reason), False once refused,
/// cancelled or done (`UpgradeRefused`, `UpgradeCancelled`, `Upgraded`). Absent on a cluster
/// never upgraded.
pub const UPGRADING: &str = "Upgrading";
