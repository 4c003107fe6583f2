//! The continuity check's last report, kept by the archiver for `/status`, what it listed (the
//! next check lists only what arrived since), and the requests for the next check
//! (`crate::continuity` runs them).

use std::sync::Mutex;

use backup_store::continuity::Known;
use tokio::sync::Notify;
use tusk_contract::status::ArchiveContinuity;

/// The last report, what the checks listed, and the requests for the next one.
#[derive(Default)]
pub struct Checks {
    last: Mutex<Option<ArchiveContinuity>>,
    known: Mutex<Option<Known>>,
    asked: Notify,
}

impl Checks {
    /// What the last check listed, for the next (one check runs at a time: the caller takes
    /// it and puts it back).
    pub fn take_known(&self) -> Option<Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    pub fn keep_known(&self, known: Option<Known>) {
        *self.known.lock().unwrap_or_else(|e| e.into_inner()) = known;
    }

    pub fn last(&self) -> Option<ArchiveContinuity> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Asks for a check now (a base backup just ended).
    pub fn soon(&self) {
        self.asked.notify_one();
    }

    /// Resolves when a check is asked for.
    pub async fn asked(&self) {
        self.asked.notified().await;
    }

    /// Records `report`; says whether it finds a break the previous report did not name.
    pub fn record(&self, report: ArchiveContinuity) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let before = last.as_ref().map(broken_files).unwrap_or_default();
        let new = broken_files(&report).iter().any(|f| !before.contains(f));
        *last = Some(report);
        new
    }
}

/// What a report names as broken: missing segments and history files, foreign files, and the
/// check's own failure.
fn broken_files(report: &ArchiveContinuity) -> Vec<String> {
    let mut files = report.missing.clone();
    files.extend(
        report
            .missing_history
            .iter()
            .map(|t| format!("{t:08X}.history")),
    );
    files.extend(report.foreign.iter().cloned());
    files
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn broken(missing: &[&str]) -> ArchiveContinuity {
        ArchiveContinuity {
            missing: missing.iter().map(|s| s.to_string()).collect(),
            missing_count: missing.len() as u64,
            ..Default::default()
        }
    }

    #[test]
    fn only_a_new_break_is_news() {
        let checks = Checks::default();
        assert!(!checks.record(broken(&[])));
        assert!(checks.record(broken(&["000000010000000000000005"])));
        assert!(!checks.record(broken(&["000000010000000000000005"])));
        assert!(checks.record(broken(&[
            "000000010000000000000005",
            "000000010000000000000009"
        ])));
        assert_eq!(checks.last().map(|r| r.missing_count), Some(2));
    }
}
