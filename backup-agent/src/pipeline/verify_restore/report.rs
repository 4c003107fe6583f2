//! The verification report: what the operator reads from the termination message (and every
//! reader from stdout). Pure: built from check outcomes, with the count comparison.

use serde::Serialize;

use backup_store::manifest::TableCount;

/// The checks, in the order they run; a check that cannot run after an earlier failure stays
/// `skipped`.
pub const CHECKS: [&str; 5] = ["checksums", "restore", "databases", "amcheck", "counts"];

/// A physical backup's checks: `wal` is the archive's part (every segment from the backup on
/// present, and recovery replaying to its end).
pub const PHYSICAL_CHECKS: [&str; 6] = [
    "checksums",
    "restore",
    "wal",
    "databases",
    "amcheck",
    "counts",
];

/// Bytes the kubelet keeps of a termination message.
pub const MAX_TERMINATION_BYTES: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Phase {
    /// No check failed (a `skipped` check, e.g. counts not recorded, is reported as such).
    Passed,
    /// At least one check failed: the backup is bad; `failedCheck` names the first.
    Failed,
    /// The verification could not run (store, scratch server, signal): nothing is known.
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    Failed,
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub result: Outcome,
    pub message: String,
}

/// Outcomes as they are established; every check starts `skipped` ("not run").
#[derive(Debug, Clone)]
pub struct Checks(Vec<Check>);

impl Default for Checks {
    fn default() -> Self {
        Checks::of(&CHECKS)
    }
}

impl Checks {
    /// Every check of a physical backup, "not run".
    pub fn physical() -> Self {
        Checks::of(&PHYSICAL_CHECKS)
    }

    fn of(names: &[&'static str]) -> Self {
        Checks(
            names
                .iter()
                .map(|name| Check {
                    name,
                    result: Outcome::Skipped,
                    message: "not run".into(),
                })
                .collect(),
        )
    }

    pub fn set(&mut self, name: &str, result: Outcome, message: impl Into<String>) {
        if let Some(check) = self.0.iter_mut().find(|c| c.name == name) {
            check.result = result;
            check.message = message.into();
            tracing::info!(check = name, result = ?result, message = %check.message, "check done");
        }
    }

    pub fn pass(&mut self, name: &str, message: impl Into<String>) {
        self.set(name, Outcome::Passed, message);
    }

    pub fn fail(&mut self, name: &str, message: impl Into<String>) {
        self.set(name, Outcome::Failed, message);
    }

    /// Marks every check still "not run" as skipped because of `why`.
    pub fn skip_rest(&mut self, why: &str) {
        for check in self.0.iter_mut().filter(|c| c.message == "not run") {
            check.message = format!("not run: {why}");
        }
    }

    pub fn first_failed(&self) -> Option<&Check> {
        self.0.iter().find(|c| c.result == Outcome::Failed)
    }

    pub fn get(&self, name: &str) -> Option<&Check> {
        self.0.iter().find(|c| c.name == name)
    }
}

/// What was restored, counted in the scratch server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub databases: u64,
    pub tables: u64,
    pub rows: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The backup verified (`None` only when even its manifest could not be read).
    pub backup_id: Option<String>,
    pub phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_check: Option<&'static str>,
    pub checks: Vec<Check>,
    pub databases: u64,
    pub tables: u64,
    pub rows: u64,
    pub started_at: jiff::Timestamp,
    pub completed_at: jiff::Timestamp,
    pub duration_seconds: f64,
    /// One line for a condition message.
    pub message: String,
}

impl Report {
    /// `error` set means the verification could not run ([`Phase::Error`]).
    pub fn new(
        backup_id: Option<String>,
        checks: Checks,
        totals: Totals,
        error: Option<String>,
        started_at: jiff::Timestamp,
        completed_at: jiff::Timestamp,
    ) -> Report {
        let failed = checks.first_failed().cloned();
        let (phase, message) = match (&error, &failed) {
            (Some(error), _) => (Phase::Error, format!("verification could not run: {error}")),
            (None, Some(check)) => (Phase::Failed, format!("{}: {}", check.name, check.message)),
            (None, None) => {
                let mut message = format!(
                    "restored {} databases, {} tables, {} rows; every check passed",
                    totals.databases, totals.tables, totals.rows
                );
                let skipped: Vec<&str> = checks
                    .0
                    .iter()
                    .filter(|c| c.result == Outcome::Skipped)
                    .map(|c| c.name)
                    .collect();
                if !skipped.is_empty() {
                    message = format!("{message} except skipped {}", skipped.join(", "));
                }
                (Phase::Passed, message)
            }
        };
        let millis = completed_at.duration_since(started_at).as_millis();
        Report {
            backup_id,
            phase,
            failed_check: failed.map(|c| c.name),
            checks: checks.0,
            databases: totals.databases,
            tables: totals.tables,
            rows: totals.rows,
            started_at,
            completed_at,
            duration_seconds: (millis as f64 / 100.0).round() / 10.0,
            message,
        }
    }

    /// The report as one JSON line of at most [`MAX_TERMINATION_BYTES`]: messages are
    /// shortened until it fits (the full ones are on stdout).
    pub fn to_termination_json(&self) -> String {
        let mut report = self.clone();
        for cap in [usize::MAX, 1000, 400, 120, 40] {
            report.message = shorten(&self.message, cap);
            for (short, full) in report.checks.iter_mut().zip(&self.checks) {
                short.message = shorten(&full.message, cap);
            }
            let json = serde_json::to_string(&report).unwrap_or_default();
            if json.len() <= MAX_TERMINATION_BYTES {
                return json;
            }
        }
        serde_json::to_string(&report).unwrap_or_default()
    }
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Compares each database's restored tables with the counts its manifest entry recorded.
/// `recorded` holds every database of the backup (`None`: not recorded); `restored` the
/// tables counted after the restore. Returns the outcome and its message.
pub fn compare_counts(
    recorded: &[(String, Option<Vec<TableCount>>)],
    restored: &[(String, Vec<TableCount>)],
) -> (Outcome, String) {
    let mut differences = Vec::new();
    let mut unrecorded = Vec::new();
    let (mut tables, mut rows) = (0u64, 0u64);
    for (database, expected) in recorded {
        let Some(expected) = expected else {
            unrecorded.push(database.as_str());
            continue;
        };
        let empty = Vec::new();
        let found = restored
            .iter()
            .find(|(d, _)| d == database)
            .map_or(&empty, |(_, t)| t);
        for want in expected {
            let name = format!("{database}.{}.{}", want.schema, want.name);
            match found
                .iter()
                .find(|t| t.schema == want.schema && t.name == want.name)
            {
                None => differences.push(format!("{name} missing (recorded {} rows)", want.rows)),
                Some(got) if got.rows != want.rows => differences.push(format!(
                    "{name}: {} rows restored, {} recorded",
                    got.rows, want.rows
                )),
                Some(_) => {
                    tables += 1;
                    rows += want.rows;
                }
            }
        }
        for extra in found.iter().filter(|t| {
            !expected
                .iter()
                .any(|w| w.schema == t.schema && w.name == t.name)
        }) {
            differences.push(format!(
                "{database}.{}.{} restored ({} rows) but not recorded",
                extra.schema, extra.name, extra.rows
            ));
        }
    }
    if !differences.is_empty() {
        let shown = differences.len().min(5);
        let mut message = differences[..shown].join("; ");
        if differences.len() > shown {
            message.push_str(&format!("; and {} more", differences.len() - shown));
        }
        return (Outcome::Failed, message);
    }
    if unrecorded.len() == recorded.len() {
        return (
            Outcome::Skipped,
            "not recorded: the backup holds no row counts (written without them)".into(),
        );
    }
    let mut message = format!("{tables} tables, {rows} rows equal the recorded counts");
    if !unrecorded.is_empty() {
        message.push_str(&format!("; not recorded for {unrecorded:?}"));
    }
    (Outcome::Passed, message)
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
