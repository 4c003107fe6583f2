use super::*;

fn table(schema: &str, name: &str, rows: u64) -> TableCount {
    TableCount {
        schema: schema.into(),
        name: name.into(),
        rows,
    }
}

fn at(text: &str) -> jiff::Timestamp {
    text.parse().expect("timestamp")
}

fn report(checks: Checks, error: Option<String>) -> Report {
    let totals = Totals {
        databases: 2,
        tables: 3,
        rows: 42,
    };
    Report::new(
        Some("b1".into()),
        checks,
        totals,
        error,
        at("2026-11-23T00:00:00Z"),
        at("2026-11-23T00:00:12.345Z"),
    )
}

#[test]
fn equal_counts_pass_with_totals() {
    let recorded = vec![
        ("app".to_string(), Some(vec![table("public", "a", 10)])),
        ("reports".to_string(), Some(vec![table("s", "b", 0)])),
    ];
    let restored = vec![
        ("app".to_string(), vec![table("public", "a", 10)]),
        ("reports".to_string(), vec![table("s", "b", 0)]),
    ];
    let (outcome, message) = compare_counts(&recorded, &restored);
    assert_eq!(outcome, Outcome::Passed);
    assert_eq!(message, "2 tables, 10 rows equal the recorded counts");
}

#[test]
fn a_different_count_a_missing_and_an_extra_table_each_fail() {
    let recorded = vec![(
        "app".to_string(),
        Some(vec![table("public", "a", 10), table("public", "gone", 1)]),
    )];
    let restored = vec![(
        "app".to_string(),
        vec![table("public", "a", 9), table("public", "new", 3)],
    )];
    let (outcome, message) = compare_counts(&recorded, &restored);
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(
        message,
        "app.public.a: 9 rows restored, 10 recorded; app.public.gone missing (recorded 1 rows); \
         app.public.new restored (3 rows) but not recorded"
    );
}

#[test]
fn counts_not_recorded_are_skipped_never_passed() {
    let recorded = vec![("app".to_string(), None)];
    let restored = vec![("app".to_string(), vec![table("public", "a", 10)])];
    let (outcome, message) = compare_counts(&recorded, &restored);
    assert_eq!(outcome, Outcome::Skipped);
    assert!(message.starts_with("not recorded"), "{message}");
    // Recorded for one database only: that one is compared, the other named.
    let recorded = vec![
        ("app".to_string(), Some(vec![table("public", "a", 10)])),
        ("old".to_string(), None),
    ];
    let (outcome, message) = compare_counts(&recorded, &restored);
    assert_eq!(outcome, Outcome::Passed);
    assert!(message.ends_with("not recorded for [\"old\"]"), "{message}");
}

#[test]
fn many_differences_are_summarised() {
    let recorded = vec![(
        "db".to_string(),
        Some((0..8).map(|i| table("s", &format!("t{i}"), 1)).collect()),
    )];
    let (outcome, message) = compare_counts(&recorded, &[]);
    assert_eq!(outcome, Outcome::Failed);
    assert!(message.ends_with("; and 3 more"), "{message}");
}

#[test]
fn passed_report_has_no_failed_check_and_names_skipped_ones() {
    let mut checks = Checks::default();
    for name in ["checksums", "restore", "databases", "amcheck"] {
        checks.pass(name, "ok");
    }
    checks.set("counts", Outcome::Skipped, "not recorded");
    let report = report(checks, None);
    assert_eq!(report.phase, Phase::Passed);
    assert_eq!(report.failed_check, None);
    assert_eq!(report.duration_seconds, 12.3);
    assert_eq!(
        report.message,
        "restored 2 databases, 3 tables, 42 rows; every check passed except skipped counts"
    );
    let json: serde_json::Value = serde_json::from_str(&report.to_termination_json()).unwrap();
    assert_eq!(json["phase"], "Passed");
    assert_eq!(json["backupId"], "b1");
    assert_eq!(json["checks"][4]["name"], "counts");
    assert_eq!(json["checks"][4]["result"], "skipped");
    assert_eq!(json["rows"], 42);
    assert!(json.get("failedCheck").is_none());
}

#[test]
fn failed_report_names_the_first_failed_check_and_skips_the_rest() {
    let mut checks = Checks::default();
    checks.fail("checksums", "db-app.pgdump.zst: sha256 differs");
    checks.skip_rest("the backup's files are not intact");
    let report = report(checks, None);
    assert_eq!(report.phase, Phase::Failed);
    assert_eq!(report.failed_check, Some("checksums"));
    assert_eq!(
        report.message,
        "checksums: db-app.pgdump.zst: sha256 differs"
    );
    let counts = &report.checks[4];
    assert_eq!(counts.result, Outcome::Skipped);
    assert_eq!(counts.message, "not run: the backup's files are not intact");
}

#[test]
fn an_error_is_neither_passed_nor_failed() {
    let mut checks = Checks::default();
    checks.fail("amcheck", "corrupt");
    let report = report(checks, Some("object store unreachable".into()));
    assert_eq!(report.phase, Phase::Error);
    assert_eq!(
        report.message,
        "verification could not run: object store unreachable"
    );
}

#[test]
fn termination_json_fits_the_kubelet_limit() {
    let mut checks = Checks::default();
    for name in CHECKS {
        checks.fail(name, "é".repeat(5000));
    }
    let json = report(checks, None).to_termination_json();
    assert!(json.len() <= MAX_TERMINATION_BYTES, "{}", json.len());
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed["failedCheck"], "checksums");
}
