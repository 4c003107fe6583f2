//! Running the Backup controller once in the mock-API scenarios: a ready `demo` with S3
//! backups (retention `keep: 1` unless told), a memory bucket, and the calls it makes.

use kube::runtime::controller::Action;
use serde_json::{Value, json};
use std::sync::Arc;
use tusk::Backup;
use tusk::clusters::status::BackupSchedule;

use super::memory_store::MemoryBucket;
use super::paths::NIGHTLY_STATUS;
use super::run::against;
use super::verifier::{Expect, Seen};
use super::world::*;

pub const PREFIX: &str = "prod/demo/";

/// Runs one Backup reconcile of `backup` next to a ready `demo` with S3 backups and retention.
pub fn empty_bucket() -> MemoryBucket {
    MemoryBucket::default()
}

pub async fn reconcile_backup(
    backup: Backup,
    cache: Cache,
    bucket: MemoryBucket,
    script: Vec<Expect>,
) -> (Result<Action, tusk::error::Error>, Vec<Seen>) {
    reconcile_backup_of("", backup, cache, bucket, script).await
}

/// [`reconcile_backup`] with `extra` lines under the cluster's `spec.backup`.
pub async fn reconcile_backup_of(
    extra: &str,
    backup: Backup,
    cache: Cache,
    bucket: MemoryBucket,
    script: Vec<Expect>,
) -> (Result<Action, tusk::error::Error>, Vec<Seen>) {
    let extra = format!("  retention: {{keep: 1}}\n{extra}");
    reconcile_backup_with(&extra, backup, cache, bucket, script).await
}

/// [`reconcile_backup`] with exactly `extra` under the cluster's `spec.backup`.
pub async fn reconcile_backup_with(
    extra: &str,
    backup: Backup,
    cache: Cache,
    bucket: MemoryBucket,
    script: Vec<Expect>,
) -> (Result<Action, tusk::error::Error>, Vec<Seen>) {
    let spec = format!("{WITH_BACKUP}{extra}");
    let (pg, mut converged_cache) = converged(&spec, true, BackupSchedule::Scheduled);
    converged_cache.jobs = cache.jobs;
    converged_cache.backups = cache.backups;
    against(&pg, converged_cache, bucket, script, |ctx| {
        tusk::backups::reconcile(Arc::new(backup), ctx)
    })
    .await
}

/// A Backup reaching a final phase: its status, then one Event.
pub fn final_status_and_event() -> Vec<Expect> {
    vec![
        Expect::apply_backup_status(NIGHTLY_STATUS),
        Expect::event(NS),
    ]
}

pub fn status_of(seen: &Seen) -> &Value {
    &seen.body["status"]
}

pub fn own_job(condition: Option<&str>) -> k8s_openapi::api::batch::v1::Job {
    job(
        "nightly",
        ("Backup", "nightly", "uid-nightly"),
        condition,
        json!({}),
    )
}

/// The caches after the Backup's own Job succeeded (hours ago, per the fixture).
pub fn succeeded_job() -> Cache {
    Cache {
        jobs: vec![own_job(Some("Complete"))],
        ..Cache::default()
    }
}
