//! The tally of a run (`tusk-e2e-summary`): the scenarios the run was to run (`cargo test
//! --list`) against the lines each wrote to `E2E_SUMMARY` (`PASS  12s  name`, `FAIL …`,
//! `SKIP[pods]  0s  name`). A run passes when nothing failed and every scenario it was to run
//! reported: a scenario that ran nothing (renamed, filtered out, the harness died) fails it as
//! surely as a failure. SKIPs are counted by the level they need, which the run did not declare.

use std::collections::BTreeMap;

/// What the lines add up to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: usize,
    pub failed: Vec<String>,
    /// By the level the scenario needs.
    pub skipped: BTreeMap<String, usize>,
    /// Scenarios the run was to run that wrote no line.
    pub silent: Vec<String>,
    /// Lines that are not a verdict.
    pub garbled: Vec<String>,
}

impl Tally {
    pub fn ok(&self) -> bool {
        self.failed.is_empty() && self.silent.is_empty() && self.garbled.is_empty()
    }

    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    /// One line per count, then what failed the run.
    pub fn report(&self) -> String {
        let per_level: Vec<String> = (self.skipped.iter())
            .map(|(level, n)| format!("{level} {n}"))
            .collect();
        let mut out = format!(
            "scenarios: {} PASS, {} FAIL, {} SKIP (by the level each needs, not declared by this run: {})\n",
            self.passed,
            self.failed.len(),
            self.skipped_total(),
            if per_level.is_empty() {
                "none".to_owned()
            } else {
                per_level.join(", ")
            }
        );
        for (what, names) in [
            ("failed", &self.failed),
            (
                "ran nothing (renamed, gone, or the run stopped)",
                &self.silent,
            ),
            ("not a verdict line", &self.garbled),
        ] {
            if !names.is_empty() {
                out.push_str(&format!("{what}: {}\n", names.join(", ")));
            }
        }
        out
    }
}

/// `expected`: `cargo test -- --list` output (`name: test` lines; others ignored);
/// `summary`: the verdict lines.
pub fn tally(expected: &str, summary: &str) -> Tally {
    let mut tally = Tally::default();
    let mut reported = BTreeMap::new();
    for line in summary.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(verdict), Some(name)) = (fields.first(), fields.get(2)) else {
            tally.garbled.push(line.to_owned());
            continue;
        };
        reported.insert((*name).to_owned(), ());
        match *verdict {
            "PASS" => tally.passed += 1,
            "FAIL" => tally.failed.push((*name).to_owned()),
            skip => match skip.strip_prefix("SKIP[").and_then(|l| l.strip_suffix(']')) {
                Some(level) => *tally.skipped.entry(level.to_owned()).or_default() += 1,
                None => tally.garbled.push(line.to_owned()),
            },
        }
    }
    let names = expected
        .lines()
        .filter_map(|l| l.trim().strip_suffix(": test"));
    // `--list` names a test by its path in the crate; the summary by the function.
    let names = names.map(|n| n.rsplit("::").next().unwrap_or(n));
    tally.silent = names
        .filter(|n| !reported.contains_key(*n))
        .map(str::to_owned)
        .collect();
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTED: &str = "crds: test\nbackup_on_demand: test\nha_frozen_primary_fails_over: test\n\n3 tests, 0 benchmarks\n";

    #[test]
    fn a_run_where_each_scenario_passed_or_skipped_for_an_undeclared_level_passes() {
        let summary = "PASS     3s  crds\nPASS    40s  backup_on_demand\nSKIP[pods]     0s  ha_frozen_primary_fails_over\n";
        let t = tally(LISTED, summary);
        assert!(t.ok(), "{}", t.report());
        assert_eq!((t.passed, t.skipped_total()), (2, 1));
        assert!(
            t.report()
                .contains("1 SKIP (by the level each needs, not declared by this run: pods 1)")
        );
    }

    #[test]
    fn a_failure_a_silent_scenario_and_an_old_style_skip_each_fail_the_run() {
        let t = tally(LISTED, "FAIL     3s  crds\n");
        assert!(!t.ok());
        assert_eq!(t.failed, ["crds"]);
        assert_eq!(
            t.silent,
            ["backup_on_demand", "ha_frozen_primary_fails_over"]
        );
        let t = tally(
            LISTED,
            "PASS 1s crds\nPASS 1s backup_on_demand\nSKIP 0s ha_frozen_primary_fails_over\n",
        );
        assert!(!t.ok(), "a SKIP without its level: {}", t.report());
        assert_eq!(t.garbled.len(), 1);
    }
}
