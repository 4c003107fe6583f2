//! What a cluster's status says about its Backups: the newest Completed one, and whether the
//! most recent one to finish succeeded.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::crd::conditions::COMPLETED;
use crate::crd::{Backup, BackupMethod, BackupPhase, SuccessfulBackup, VerifiedBackup};
use crate::runtime::conditions::Update;

/// The backup facts of one cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub last_successful: Option<SuccessfulBackup>,
    /// The most recently finished backup.
    pub last_finished: Option<FinishedBackup>,
    /// Why backups are overdue (see `freshness`), which outweighs the last outcome.
    pub overdue: Option<String>,
    /// The newest Backup whose verification passed.
    pub last_verified: Option<VerifiedBackup>,
    /// `BackupVerified`, for clusters with `spec.backup.verify`.
    pub verified: Option<Update<'static>>,
    /// The oldest Completed base backup (when it completed, its name), where the recovery
    /// window starts, and how many there are.
    pub oldest_base: Option<(Time, String)>,
    pub base_backups: usize,
    /// Every Completed base backup (when it completed, its name), oldest first: where the
    /// window starts again after a gap.
    pub bases: Vec<(Time, String)>,
    /// When the newest base backup completed: the primary owes a continuity check after it.
    pub newest_base_at: Option<Time>,
}

/// A Backup that reached a final phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedBackup {
    pub succeeded: bool,
    pub name: String,
    /// A sentence for the `LastBackupSucceeded` condition.
    pub message: String,
}

/// When a final Backup finished: its manifest's time when Completed, the condition's
/// transition when Failed.
fn finished_at(backup: &Backup) -> Option<Time> {
    let status = backup.status.as_ref()?;
    match status.phase? {
        BackupPhase::Completed => status.completed_at.clone(),
        BackupPhase::Failed => status
            .conditions
            .iter()
            .find(|c| c.type_ == COMPLETED)
            .map(|c| c.last_transition_time.clone()),
        _ => None,
    }
}

/// Summarises the Backups of `cluster`.
pub fn summarize<'a>(backups: impl IntoIterator<Item = &'a Backup>, cluster: &str) -> Summary {
    let mut finished: Vec<(Time, &Backup)> = backups
        .into_iter()
        .filter(|b| b.spec.cluster.name == cluster)
        .filter_map(|b| Some((finished_at(b)?, b)))
        .collect();
    finished.sort_by(|(a, x), (b, y)| a.0.cmp(&b.0).then_with(|| x.name_any().cmp(&y.name_any())));
    let last_successful = finished
        .iter()
        .rev()
        .find(|(_, b)| b.phase() == BackupPhase::Completed)
        .map(|(at, b)| SuccessfulBackup {
            name: b.name_any(),
            completed_at: at.clone(),
        });
    let last_finished = finished.last().map(|(_, b)| {
        let succeeded = b.phase() == BackupPhase::Completed;
        let message = if succeeded {
            format!("Backup {} completed", b.name_any())
        } else {
            let error = b
                .status
                .as_ref()
                .and_then(|s| s.error.clone())
                .unwrap_or_default();
            format!("Backup {} failed: {error}", b.name_any())
        };
        FinishedBackup {
            succeeded,
            name: b.name_any(),
            message,
        }
    });
    let base: Vec<_> = finished
        .iter()
        .filter(|(_, b)| {
            b.phase() == BackupPhase::Completed && b.spec.method == BackupMethod::Physical
        })
        .collect();
    Summary {
        last_successful,
        last_finished,
        base_backups: base.len(),
        oldest_base: base.first().map(|(at, b)| (at.clone(), b.name_any())),
        bases: base
            .iter()
            .map(|(at, b)| (at.clone(), b.name_any()))
            .collect(),
        newest_base_at: base.last().map(|(at, _)| at.clone()),
        ..Summary::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BackupStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use k8s_openapi::jiff::Timestamp;

    fn at(s: i64) -> Time {
        Time(Timestamp::from_second(s).unwrap())
    }

    fn backup(name: &str, phase: BackupPhase, when: i64) -> Backup {
        let mut b = Backup::of_cluster(name, "prod", "demo");
        let mut status = BackupStatus {
            phase: Some(phase),
            ..BackupStatus::default()
        };
        match phase {
            BackupPhase::Completed => status.completed_at = Some(at(when)),
            _ => {
                status.error = Some("JobFailed".into());
                status.conditions.push(Condition {
                    type_: COMPLETED.into(),
                    status: "False".into(),
                    last_transition_time: at(when),
                    reason: "JobFailed".into(),
                    message: String::new(),
                    observed_generation: None,
                });
            }
        }
        b.status = Some(status);
        b
    }

    #[test]
    fn newest_completed_and_last_outcome() {
        let all = [
            backup("old", BackupPhase::Completed, 100),
            backup("good", BackupPhase::Completed, 200),
            backup("bad", BackupPhase::Failed, 300),
            backup("running", BackupPhase::Running, 400),
        ];
        let summary = summarize(all.iter(), "demo");
        assert_eq!(
            summary.last_successful.as_ref().map(|s| s.name.as_str()),
            Some("good")
        );
        let FinishedBackup {
            succeeded: ok,
            name,
            message,
        } = summary.last_finished.unwrap();
        assert!(!ok);
        assert_eq!(name, "bad");
        assert_eq!(message, "Backup bad failed: JobFailed");
        assert_eq!(summarize(all.iter(), "other"), Summary::default());
        assert_eq!((summary.oldest_base, summary.base_backups), (None, 0));
    }

    #[test]
    fn the_recovery_window_rests_on_the_oldest_completed_base_backup() {
        let physical = |name, phase, when| {
            let mut b = backup(name, phase, when);
            b.spec.method = BackupMethod::Physical;
            b
        };
        let all = [
            backup("dump", BackupPhase::Completed, 50),
            physical("base-failed", BackupPhase::Failed, 60),
            physical("base-old", BackupPhase::Completed, 100),
            physical("base-new", BackupPhase::Completed, 200),
        ];
        let summary = summarize(all.iter(), "demo");
        assert_eq!(summary.oldest_base, Some((at(100), "base-old".to_owned())));
        assert_eq!(summary.base_backups, 2);
    }
}
