//! The status of a Backup for each step, built from plain values.

use backup_store::Manifest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::crd::conditions::COMPLETED;
use crate::crd::{BackupPhase, BackupStatus, Destination, PhysicalRange};
use crate::runtime::conditions::{self, Update};

/// Everything known about a completed backup, read from its manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Record<'a> {
    pub manifest: &'a Manifest,
    /// sha256 of the manifest's bytes, which list the sha256 of every file.
    pub manifest_sha256: String,
    /// e.g. `s3://bucket/path/<namespace>/<cluster>/<backupId>/`.
    pub location: String,
}

fn with_condition(
    old: Option<&BackupStatus>,
    phase: BackupPhase,
    reason: &str,
    message: String,
    now: &Time,
) -> BackupStatus {
    let mut status = old.cloned().unwrap_or_default();
    status.phase = Some(phase);
    let update = Update {
        type_: COMPLETED,
        status: phase == BackupPhase::Completed,
        reason,
        message,
    };
    conditions::set(&mut status.conditions, update, None, now);
    status
}

/// Pending, with why it is waiting.
pub fn pending(
    old: Option<&BackupStatus>,
    reason: &str,
    message: String,
    now: &Time,
) -> BackupStatus {
    with_condition(old, BackupPhase::Pending, reason, message, now)
}

/// Running in Job `job`, writing to `destination`.
pub fn running(
    old: Option<&BackupStatus>,
    job: &str,
    started: Option<Time>,
    destination: &Destination,
    now: &Time,
) -> BackupStatus {
    let message = format!("Job {job} is running backup-agent");
    let mut status = with_condition(old, BackupPhase::Running, "Running", message, now);
    status.job = Some(job.to_owned());
    status.backup_id = Some(job.to_owned());
    status.destination = Some(destination.clone());
    status.started_at = started.or(status.started_at).or_else(|| Some(now.clone()));
    status
}

/// Completed: only ever built from a manifest read from the bucket.
pub fn completed(old: Option<&BackupStatus>, record: &Record, now: &Time) -> BackupStatus {
    let manifest = record.manifest;
    let message = format!("manifest read from {}", record.location);
    let mut status = with_condition(old, BackupPhase::Completed, "Completed", message, now);
    status.backup_id = Some(manifest.backup_id.clone());
    status.started_at = Some(Time(manifest.started_at));
    status.completed_at = Some(Time(manifest.completed_at));
    status.location = Some(record.location.clone());
    status.size_bytes = Some(i64::try_from(manifest.total_size_bytes()).unwrap_or(i64::MAX));
    status.sha256 = Some(record.manifest_sha256.clone());
    status.postgres_version = Some(manifest.server_version.clone());
    status.physical = manifest.physical.as_ref().map(|p| PhysicalRange {
        system_identifier: p.system_identifier.clone(),
        timeline: p.timeline,
        start_lsn: p.start_lsn.clone(),
        stop_lsn: p.stop_lsn.clone(),
    });
    status.error = None;
    status
}

/// Failed, with the reason; final.
pub fn failed(
    old: Option<&BackupStatus>,
    reason: &str,
    message: String,
    now: &Time,
) -> BackupStatus {
    let mut status = with_condition(old, BackupPhase::Failed, reason, message.clone(), now);
    status.error = Some(message);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    /// A manifest as the agent writes it: globals of 100 bytes and one 2000-byte dump.
    fn manifest() -> Manifest {
        let json = serde_json::json!({
            "formatVersion": 1, "backupId": "nightly", "namespace": "prod", "cluster": "demo",
            "clusterUid": "c0ffee", "startedAt": "2026-11-22T02:00:00Z",
            "completedAt": "2026-11-22T02:01:00Z", "serverVersion": "18.1",
            "pgDumpVersion": "pg_dump (PostgreSQL) 18.1", "compression": "zstd",
            "files": [
                {"name": "globals.sql.zst", "kind": "database", "database": "app",
                 "databaseOwner": "app", "sizeBytes": 100, "sha256": "ab"},
                {"name": "app.dump.zst", "kind": "database", "database": "app",
                 "databaseOwner": "app", "sizeBytes": 2000, "sha256": "ab"},
            ],
        });
        Manifest::from_json(json.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn completed_carries_what_the_manifest_says() {
        let now = Time(Timestamp::from_second(2000).unwrap());
        let m = manifest();
        let record = Record {
            manifest: &m,
            manifest_sha256: "cafe".into(),
            location: "s3://b/p/prod/demo/nightly/".into(),
        };
        let status = completed(None, &record, &now);
        assert_eq!(status.phase, Some(BackupPhase::Completed));
        assert_eq!(status.size_bytes, Some(2100));
        assert_eq!(status.sha256.as_deref(), Some("cafe"));
        assert_eq!(status.postgres_version.as_deref(), Some("18.1"));
        assert_eq!(status.completed_at, Some(Time(m.completed_at)));
        assert!(conditions::is_true(&status.conditions, COMPLETED));
        assert_eq!(status.physical, None, "a dump has no place in the WAL");
    }

    #[test]
    fn a_completed_base_backup_records_its_place_in_the_wal() {
        let now = Time(Timestamp::from_second(2000).unwrap());
        let mut m = manifest();
        m.physical = Some(backup_store::manifest::PhysicalBackup {
            system_identifier: "7300000000000000001".into(),
            timeline: 2,
            start_lsn: "0/5000028".into(),
            stop_lsn: "0/5000100".into(),
            wal_segment_size: None,
        });
        let record = Record {
            manifest: &m,
            manifest_sha256: "cafe".into(),
            location: "s3://b/p/prod/demo/base/".into(),
        };
        let physical = completed(None, &record, &now).physical.unwrap();
        assert_eq!(physical.system_identifier, "7300000000000000001");
        assert_eq!(physical.timeline, 2);
        assert_eq!(
            (physical.start_lsn.as_str(), physical.stop_lsn.as_str()),
            ("0/5000028", "0/5000100")
        );
    }

    #[test]
    fn failed_keeps_the_reason_and_is_not_completed() {
        let now = Time(Timestamp::from_second(2000).unwrap());
        let status = failed(None, "ManifestMissing", "no manifest".into(), &now);
        assert_eq!(status.phase, Some(BackupPhase::Failed));
        assert_eq!(status.error.as_deref(), Some("no manifest"));
        let condition = &status.conditions[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "ManifestMissing")
        );
    }
}
