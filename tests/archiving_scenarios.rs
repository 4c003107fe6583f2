//! Mock-API scenarios of the `ContinuousArchiving` condition (`spec.backup.walArchive`): the
//! operator reads the primary's manager and turns the condition False, with the store's error,
//! while its uploads fail; True again once they succeed; no condition without archiving. A gap
//! the disk policy opened turns it False naming the gap, and once closed brings a base backup.

mod support;

use std::sync::Arc;

use support::paths::{BACKUPS, STATUS};
use support::read::condition;
use support::replicas::{self, Managers, pod};
use support::verifier::Expect;
use support::world::*;
use tusk::clusters::status::BackupSchedule;
use tusk::runtime::instances::{ArchiveStatus, InstanceStatus, LeaseClock};
use tusk_contract::status::ArchiveGap;

fn primary_reporting(archive: ArchiveStatus) -> Managers {
    let report = InstanceStatus {
        pod: "demo-0".into(),
        archive: Some(archive),
        ..InstanceStatus::default()
    };
    Managers(vec![("10.0.0.10", report)])
}

async fn condition_after(spec: &str, archive: ArchiveStatus) -> serde_json::Value {
    let (pg, mut cache) = converged(spec, true, BackupSchedule::Scheduled);
    cache.set_pods(&pg, vec![pod("demo-0", "primary", true, "10.0.0.10")]);
    let clock = Arc::new(LeaseClock::default());
    let managers = primary_reporting(archive);
    let script = vec![Expect::apply_status(STATUS)];
    let (_, seen) = replicas::reconcile(&pg, cache, &clock, managers, script).await;
    condition(&seen[0].body, "ContinuousArchiving").clone()
}

fn archiving() -> String {
    format!("{WITH_BACKUP}  walArchive: {{}}\n")
}

#[tokio::test]
async fn failing_uploads_turn_the_condition_false_with_the_stores_error() {
    let failing = ArchiveStatus {
        archived_count: 7,
        failed_count: 3,
        failing: true,
        pending: 5,
        last_failed_wal: Some("000000010000000000000009".into()),
        last_failed_at: Some(1_800_000_000),
        last_error: Some("s3://backups: dispatch failure: connection refused".into()),
        ..ArchiveStatus::default()
    };
    let condition = condition_after(&archiving(), failing).await;
    assert_eq!(condition["status"], "False", "{condition}");
    assert_eq!(condition["reason"], "ArchiveFailing");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("000000010000000000000009") && message.contains("connection refused"),
        "{message}"
    );
    assert!(message.ends_with("5 file(s) wait"), "{message}");
}

#[tokio::test]
async fn archived_wal_turns_it_true() {
    let working = ArchiveStatus {
        archived_count: 7,
        last_archived_wal: Some("000000010000000000000009".into()),
        last_archived_at: Some(1_800_000_000),
        ..ArchiveStatus::default()
    };
    let condition = condition_after(&archiving(), working).await;
    assert_eq!(condition["status"], "True", "{condition}");
    assert_eq!(condition["reason"], "Archiving");
}

#[tokio::test]
async fn a_primary_that_does_not_answer_invents_no_condition() {
    let (pg, mut cache) = converged(&archiving(), true, BackupSchedule::Scheduled);
    cache.set_pods(&pg, vec![pod("demo-0", "primary", true, "10.0.0.10")]);
    let clock = Arc::new(LeaseClock::default());
    // The pod's state is new to the status, so it is written: without the condition.
    let script = vec![Expect::apply_status(STATUS)];
    let (_, seen) = replicas::reconcile(&pg, cache, &clock, Managers(Vec::new()), script).await;
    let conditions = seen[0].body["status"]["conditions"].to_string();
    assert!(!conditions.contains("ContinuousArchiving"), "{conditions}");
}

fn gap(closed_at: Option<i64>) -> ArchiveGap {
    ArchiveGap {
        system_identifier: "7400000000000000001".into(),
        first_segment: Some("000000010000000000000010".into()),
        last_segment: Some("000000010000000000000012".into()),
        files: 3,
        opened_at: jiff::Timestamp::now().as_second() - 600,
        closed_at,
        volume_used_percent: 82,
        reason: "s3://backups: connection refused".into(),
        ..ArchiveGap::default()
    }
}

#[tokio::test]
async fn an_open_gap_turns_the_condition_false_naming_the_released_wal() {
    let open = ArchiveStatus {
        failing: true,
        gave_way_count: 3,
        gap: Some(gap(None)),
        ..ArchiveStatus::default()
    };
    let condition = condition_after(&archiving(), open).await;
    assert_eq!(condition["status"], "False", "{condition}");
    assert_eq!(condition["reason"], "ArchiveGap");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("000000010000000000000010 to 000000010000000000000012"),
        "{message}"
    );
}

#[tokio::test]
async fn a_closed_gap_brings_a_base_backup_named_after_it() {
    let closed_at = jiff::Timestamp::now().as_second() - 60;
    let report = ArchiveStatus {
        archived_count: 1,
        gap: Some(gap(Some(closed_at))),
        ..ArchiveStatus::default()
    };
    let (pg, mut cache) = converged(&archiving(), true, BackupSchedule::Scheduled);
    cache.set_pods(&pg, vec![pod("demo-0", "primary", true, "10.0.0.10")]);
    let clock = Arc::new(LeaseClock::default());
    let script = vec![
        Expect::create(BACKUPS),
        Expect::event("prod"),
        Expect::apply_status(STATUS),
    ];
    let managers = primary_reporting(report);
    let (_, seen) = replicas::reconcile(&pg, cache, &clock, managers, script).await;
    let backup = &seen[0].body;
    assert_eq!(backup["metadata"]["name"], format!("demo-gap-{closed_at}"));
    assert_eq!(backup["spec"]["method"], "physical", "{backup}");
    assert_eq!(backup["spec"]["cluster"]["name"], "demo");
    assert_eq!(
        condition(&seen[2].body, "ContinuousArchiving")["status"],
        "True"
    );
}
