//! Verification of backups: restoring one into a throwaway server inside a Job and checking it
//! (`backup-agent verify-restore`). The policy on a PostgreSQL, the request on a Backup and the
//! proof in both statuses.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{KubeSchema, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Backup, rules};

/// Annotation on a Completed Backup asking for one verification. Any new value (a timestamp, a
/// ticket) asks again; the value of the run is recorded in `status.verification.request`. An
/// annotation rather than a field because a Backup's spec is immutable and a verification
/// changes nothing about the backup itself.
pub const VERIFY_ANNOTATION: &str = "tusk.dev/verify";

/// Prefix of the [`VERIFY_ANNOTATION`] values the operator writes for scheduled verifications.
pub const SCHEDULED_VERIFY_PREFIX: &str = "scheduled-";

/// Scheduled verification of a cluster's newest Completed backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyPolicy {
    /// Kubernetes CronJob schedule (UTC) of verifications of the newest Completed backup, e.g.
    /// `0 4 * * 0` or `@weekly`.
    #[x_kube(validation = Rule::new(rules::schedule()).message("spec.backup.verify.schedule must be a Kubernetes CronJob schedule: five fields or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"))]
    #[schemars(length(max = 128))]
    pub schedule: String,
    /// `BackupVerified` turns False when no verification passed within this long, e.g. `8d`;
    /// unset, only a failed verification turns it False.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]*[hdw]$')").message("spec.backup.verify.window must be a number followed by h, d or w, e.g. 8d"))]
    #[schemars(length(max = 16))]
    pub window: Option<String>,
    /// How long one verification Job may run before Kubernetes stops it; 21600 (6 hours) when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 60").message("spec.backup.verify.jobDeadlineSeconds must be at least 60"))]
    pub job_deadline_seconds: Option<i64>,
}

/// Where a verification stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VerificationPhase {
    /// The Job runs.
    Running,
    /// Every check passed (a skipped one, such as counts not recorded, is listed as skipped).
    Passed,
    /// A check failed: the backup is bad; `failedCheck` names the first.
    Failed,
    /// The verification could not run (store, scratch server, deadline); nothing is known.
    Error,
}

/// One check of a verification, as the agent reported it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct VerificationCheck {
    /// `checksums`, `restore`, `databases`, `amcheck` or `counts`.
    pub name: String,
    /// `passed`, `failed` or `skipped`.
    pub result: String,
    /// What the check found, in the agent's words (empty when there is nothing to add).
    pub message: String,
}

/// The most recent verification of a Backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<VerificationPhase>,
    /// The `tusk.dev/verify` value this run answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Name of the Job that runs `backup-agent verify-restore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Every check, in the order it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<VerificationCheck>,
    /// The first failed check, when the phase is Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_check: Option<String>,
    /// Databases in the backup's manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub databases: Option<i64>,
    /// Tables counted in the restored copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<i64>,
    /// Rows counted in the restored copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<i64>,
    /// How long the verification took, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// One sentence: what passed, or what failed and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The newest Backup whose verification passed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifiedBackup {
    /// Name of the Backup.
    pub name: String,
    /// When the verified backup completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// When its verification passed.
    pub verified_at: Time,
}

/// The verification asked of `backup` by its [`VERIFY_ANNOTATION`]. Read by both controllers
/// (the cluster's schedule asks, the Backup's controller runs it), so it lives with the type.
pub fn verify_request(backup: &Backup) -> Option<&str> {
    backup
        .annotations()
        .get(VERIFY_ANNOTATION)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// The condition reason of a failed check: what is wrong with the backup, in one word.
pub fn failed_check_reason(check: Option<&str>) -> &'static str {
    match check {
        Some("checksums") => "ChecksumMismatch",
        Some("restore") => "RestoreFailed",
        Some("databases") => "DatabaseMissing",
        Some("amcheck") => "AmcheckFailed",
        Some("counts") => "CountsDiffer",
        _ => "VerificationFailed",
    }
}

/// The newest Backup whose most recent verification passed.
pub fn last_verified<'a>(backups: impl IntoIterator<Item = &'a Backup>) -> Option<VerifiedBackup> {
    backups
        .into_iter()
        .filter_map(|b| {
            let v = b.status.as_ref()?.verification.as_ref()?;
            let verified_at = v.completed_at.clone()?;
            (v.phase == Some(VerificationPhase::Passed)).then(|| VerifiedBackup {
                name: b.name_any(),
                completed_at: b.status.as_ref().and_then(|s| s.completed_at.clone()),
                verified_at,
            })
        })
        .max_by(|a, b| {
            (a.completed_at.as_ref().map(|t| t.0), &a.name)
                .cmp(&(b.completed_at.as_ref().map(|t| t.0), &b.name))
        })
}
