//! Mock-API scenarios for what the cluster reconcile does around backups: recording scheduled
//! runs, restoring into a new cluster, and the cleanup finalizer on deletion.

mod support;

use kube::runtime::controller::Action;
use serde_json::{Value, json};
use support::memory_store::MemoryBucket;
use support::paths::{BACKUPS, CLUSTER, CRONJOBS, JOBS, SECRETS, STATUS};
use support::read::condition;
use support::run::reconcile_cluster as run;
use support::scripts::{delete_finalizer, restore_finished};
use support::verifier::Expect;
use support::world::*;
use tusk::PostgreSQL;
use tusk::clusters::status::BackupSchedule;

/// The restore's superuser certificate is issued from the stored CA (read), then the restore
/// Job is created, with its Event, and the status says so.
fn restore_job_created(pg: &PostgreSQL) -> Vec<Expect> {
    let cluster = tusk::resources::Cluster::new(pg).expect("cluster");
    let now = time::OffsetDateTime::now_utc();
    let lifetimes = tusk::resources::ca_rotation::Lifetimes::default();
    let ca = tusk::resources::ca_rotation::CaState::issue(&cluster, now, &lifetimes).expect("CA");
    let stored = serde_json::to_value(ca.secret(&cluster)).expect("JSON");
    vec![
        Expect::new(http::Method::GET, format!("{SECRETS}/demo-ca"), move |_| {
            (http::StatusCode::OK, stored)
        }),
        Expect::apply(format!("{SECRETS}/demo-restore-tls")),
        Expect::create(JOBS),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ]
}

fn env<'a>(job: &'a Value, name: &str) -> &'a Value {
    job["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == name))
        .map(|e| &e["value"])
        .unwrap_or(&Value::Null)
}

// --- scheduled runs -------------------------------------------------------------------------

#[tokio::test]
async fn each_scheduled_run_is_recorded_once_as_a_backup() {
    let (pg, mut cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    let labels =
        json!({"app.kubernetes.io/managed-by": "tusk-operator", "tusk.dev/cluster": "demo"});
    cache.jobs = vec![job(
        "demo-backup-29000000",
        ("CronJob", "demo-backup", "cj"),
        None,
        labels,
    )];
    let script = vec![
        Expect::create(BACKUPS),
        Expect::apply(format!("{JOBS}/demo-backup-29000000")),
        Expect::event(NS),
    ];
    let (result, seen) = run(pg, cache, MemoryBucket::default(), script).await;
    result.expect("reconciled");
    let record = &seen[0].body;
    assert_eq!(record["metadata"]["name"], "demo-backup-29000000");
    assert_eq!(record["metadata"]["labels"]["tusk.dev/scheduled"], "true");
    assert_eq!(record["spec"]["cluster"]["name"], "demo");
    assert!(
        record["metadata"]["ownerReferences"].is_null(),
        "Backups outlive their cluster"
    );
    assert_eq!(
        seen[1].body,
        json!({"metadata": {"annotations": {"tusk.dev/recorded-as": "demo-backup-29000000"}}})
    );
    assert_eq!(seen[2].body["note"], "Created Backup demo-backup-29000000");
}

#[tokio::test]
async fn a_scheduled_base_backup_is_recorded_as_a_physical_backup() {
    let spec = format!("{WITH_BACKUP}  walArchive: {{}}\n");
    let (pg, mut cache) = converged(&spec, true, BackupSchedule::Scheduled);
    let labels =
        json!({"app.kubernetes.io/managed-by": "tusk-operator", "tusk.dev/cluster": "demo"});
    cache.jobs = vec![job(
        "demo-base-29000000",
        ("CronJob", "demo-base", "cj"),
        None,
        labels,
    )];
    let script = vec![
        Expect::create(BACKUPS),
        Expect::apply(format!("{JOBS}/demo-base-29000000")),
        Expect::event(NS),
    ];
    let (result, seen) = run(pg, cache, MemoryBucket::default(), script).await;
    result.expect("reconciled");
    let record = &seen[0].body;
    assert_eq!(record["metadata"]["name"], "demo-base-29000000");
    assert_eq!(record["spec"]["method"], "physical");
    assert_eq!(record["metadata"]["labels"]["tusk.dev/scheduled"], "true");
}

// --- restore --------------------------------------------------------------------------------

const RESTORE_FROM_BACKUP: &str = r#"
storage: {size: 1Gi}
restore:
  backup: {name: nightly}
"#;

/// A new cluster restoring Backup `nightly` of `demo` (renamed `shop` here so the source and the
/// target differ), with its StatefulSet ready.
fn restoring(status_ready: bool) -> (PostgreSQL, Cache) {
    let (mut pg, mut cache) = converged(RESTORE_FROM_BACKUP, true, BackupSchedule::NotConfigured);
    if !status_ready {
        not_ready_status(&mut pg, BackupSchedule::NotConfigured);
    }
    let mut source = completed_backup("nightly", "2026-11-22T02:01:00Z");
    source.spec.cluster.name = "shop".into();
    cache.backups = vec![source];
    (pg, cache)
}

#[tokio::test]
async fn a_restore_starts_once_the_database_serves_and_gates_ready() {
    let (pg, cache) = restoring(false);
    let script = restore_job_created(&pg);
    let (_, seen) = run(pg, cache, MemoryBucket::default(), script).await;
    // A certificate naming the superuser, for this restore only.
    let certificate = &seen[1].body;
    assert_eq!(certificate["metadata"]["name"], "demo-restore-tls");
    assert_eq!(certificate["type"], "kubernetes.io/tls");
    let job = &seen[2].body;
    assert_eq!(job["metadata"]["name"], "demo-restore");
    assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "PostgreSQL");
    assert_eq!(job["spec"]["backoffLimit"], 0);
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["args"],
        json!([
            "restore",
            "--preserve-role",
            "app",
            "--preserve-role",
            "tusk_replication",
            "--preserve-role",
            "tusk_rewind",
            "--preserve-role",
            "tusk_backup"
        ])
    );
    assert_eq!(
        env(job, "TUSK_CLUSTER"),
        "shop",
        "read from the source cluster's prefix"
    );
    // The -rw Service routes no client yet: the Job goes to the primary pod by its own name.
    assert_eq!(
        env(job, "PGHOST"),
        "demo-0.demo-hl.prod.svc",
        "written into this cluster"
    );
    assert_eq!(env(job, "TUSK_BACKUP_ID"), "nightly");
    let status = &seen[4].body;
    assert_eq!(condition(status, "Restored")["reason"], "Restoring");
    assert_eq!(condition(status, "Ready")["status"], "False");
    assert_eq!(condition(status, "Ready")["reason"], "WaitingForRestore");
    assert_eq!(status["status"]["phase"], "Provisioning");
}

#[tokio::test]
async fn a_finished_restore_is_recorded_once_and_then_the_cluster_is_ready() {
    let (pg, mut cache) = restoring(false);
    let mut done = job(
        "demo-restore",
        ("PostgreSQL", "demo", "c0ffee"),
        Some("Complete"),
        json!({}),
    );
    let restore = tusk::resources::RestorePlan {
        destination: serde_json::from_value(json!({"s3": {"bucket": "backups", "path": "p"}}))
            .expect("dest"),
        layout: tusk::resources::Layout {
            namespace: NS.into(),
            cluster: "shop".into(),
        },
        backup_id: "nightly".into(),
    };
    let cluster = tusk::resources::Cluster::new(&pg).expect("cluster");
    done.spec = tusk::resources::restore_job(&cluster, &restore, &agent()).spec;
    cache.jobs = vec![done];
    cache.pods = vec![support::replicas::pod(
        "demo-0",
        "primary",
        true,
        "10.0.0.10",
    )];
    let script = restore_finished();
    let (result, seen) = run(pg, cache, MemoryBucket::default(), script).await;
    result.expect("reconciled");
    // Clients are routed in the same reconcile, before the status says Ready (not one later).
    let endpoints = &seen[0].body["endpoints"];
    assert_eq!(
        endpoints[0]["addresses"],
        json!(["10.0.0.10"]),
        "{endpoints}"
    );
    assert_eq!(endpoints[0]["targetRef"]["name"], "demo-0");
    assert_eq!(
        seen[1].body["endpoints"], *endpoints,
        "-r: the one instance"
    );
    let status = &seen[2].body;
    assert_eq!(condition(status, "Restored")["status"], "True");
    assert_eq!(condition(status, "Ready")["status"], "True");
    assert_eq!(status["status"]["restoredFrom"]["backupId"], "nightly");
    assert_eq!(
        status["status"]["restoredFrom"]["location"],
        "s3://backups/p/prod/shop/nightly/"
    );
    assert_eq!(seen[3].body["reason"], "Restored");
    assert_eq!(seen[4].body["reason"], "Ready");
}

#[tokio::test]
async fn a_failed_restore_is_reported_once_and_never_retried_by_itself() {
    let (pg, mut cache) = restoring(false);
    cache.jobs = vec![job(
        "demo-restore",
        ("PostgreSQL", "demo", "c0ffee"),
        Some("Failed"),
        json!({}),
    )];
    let reason =
        "integrity check failed: db-app.pgdump.zst: sha256 ab12 differs from the manifest's cd34";
    let script = vec![
        Expect::job_pods(NS, 5, reason),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (_, seen) = run(pg.clone(), cache.clone(), MemoryBucket::default(), script).await;
    assert!(
        seen[0]
            .query
            .contains("batch.kubernetes.io%2Fjob-name%3Ddemo-restore"),
        "{}",
        seen[0].query
    );
    let status = &seen[1].body;
    let restored = condition(status, "Restored");
    assert_eq!(restored["reason"], "RestoreFailed");
    let message = restored["message"].as_str().unwrap_or_default();
    let named = format!("restore Job demo-restore failed: {reason} (exit code 5)");
    assert!(message.starts_with(&named), "{message}");
    // No claim the operator cannot know: the agent's reason says what was applied.
    assert!(!message.contains("nothing was applied"), "{message}");
    assert!(
        message.contains("undoes what a failed attempt left"),
        "{message}"
    );
    assert_eq!(condition(status, "Ready")["status"], "False");
    assert_eq!(
        (
            seen[2].body["type"].as_str(),
            seen[2].body["reason"].as_str()
        ),
        (Some("Warning"), Some("RestoreFailed"))
    );
    assert!(
        seen[2].body["note"]
            .as_str()
            .unwrap_or_default()
            .contains(reason)
    );

    // The next reconcile sees its own status: it reads the pod again, and writes nothing.
    let mut again = pg;
    again.status = serde_json::from_value(seen[1].body["status"].clone()).expect("status");
    let script = vec![Expect::job_pods(NS, 5, reason)];
    let (_, seen) = run(again, cache, MemoryBucket::default(), script).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
}

#[tokio::test]
async fn latest_from_a_bucket_is_pinned_to_the_newest_complete_backup() {
    let spec = r#"
storage: {size: 1Gi}
restore:
  objectStore:
    cluster: demo
    destination: {s3: {bucket: backups}}
"#;
    let (mut pg, cache) = converged(spec, true, BackupSchedule::NotConfigured);
    not_ready_status(&mut pg, BackupSchedule::NotConfigured);
    let bucket = MemoryBucket::default();
    bucket.put(
        "prod/demo/b1/manifest.json",
        manifest_json("b1", "2026-11-20T02:01:00Z"),
    );
    bucket.put(
        "prod/demo/b2/manifest.json",
        manifest_json("b2", "2026-11-21T02:01:00Z"),
    );
    bucket.put(
        "prod/demo/b3/app.dump.zst",
        "a backup without manifest does not exist",
    );
    let script = restore_job_created(&pg);
    let (_, seen) = run(pg, cache, bucket, script).await;
    assert_eq!(env(&seen[2].body, "TUSK_BACKUP_ID"), "b2");
}

// --- deletion -------------------------------------------------------------------------------

fn deleting(on_delete: &str) -> (PostgreSQL, Cache) {
    let spec = format!("{WITH_BACKUP}  onDelete: {on_delete}\n");
    let (mut pg, mut cache) = converged(&spec, true, BackupSchedule::Scheduled);
    pg.metadata.deletion_timestamp = Some(at(2_000));
    let mut other = completed_backup("other-cluster", "2026-11-22T02:01:00Z");
    other.spec.cluster.name = "demo2".into();
    cache.backups = vec![
        completed_backup("b1", "2026-11-21T02:01:00Z"),
        completed_backup("b2", "2026-11-22T02:01:00Z"),
        other,
    ];
    (pg, cache)
}

fn bucket() -> MemoryBucket {
    let bucket = MemoryBucket::default();
    for key in [
        "prod/demo/b1/manifest.json",
        "prod/demo/b1/app.dump.zst",
        "prod/demo/b2/manifest.json",
        "prod/demo2/b1/manifest.json",
        "staging/demo/b1/manifest.json",
    ] {
        bucket.put(key, "x");
    }
    bucket
}

#[tokio::test]
async fn retain_releases_the_cluster_at_once_and_keeps_everything() {
    let (pg, cache) = deleting("Retain");
    let bucket = bucket();
    let script = vec![Expect::patch_cluster(CLUSTER), Expect::event(NS)];
    let (_, seen) = run(pg, cache, bucket.clone(), script).await;
    assert_eq!(seen[0].body[1]["value"], json!([]));
    assert_eq!(seen[1].body["reason"], "BackupsRetained");
    assert_eq!(bucket.keys().len(), 5, "no object deleted");
}

#[tokio::test]
async fn delete_empties_exactly_the_clusters_prefix_and_its_backups() {
    let (pg, cache) = deleting("Delete");
    let bucket = bucket();
    let script = delete_finalizer(&["b1", "b2"]);
    let (result, seen) = run(pg, cache, bucket.clone(), script).await;
    assert_eq!(result.expect("reconciled"), Action::await_change());
    assert_eq!(
        bucket.keys(),
        [
            "prod/demo2/b1/manifest.json",
            "staging/demo/b1/manifest.json"
        ],
        "a cluster named demo2 and a demo in another namespace keep theirs"
    );
    assert_eq!(seen[3].body["reason"], "BackupsDeleted");
    assert_eq!(seen[4].body[1]["value"], json!([]));
}

#[tokio::test]
async fn an_unreachable_store_blocks_deletion_until_retain() {
    let (pg, cache) = deleting("Delete");
    let bucket = bucket();
    bucket.set_unreachable(true);
    // The failure's Event, but no second status: written from the copy read before the
    // Cleanup condition, it dropped that condition again (found by the L4 scenario).
    let script = vec![
        Expect::delete(format!("{CRONJOBS}/demo-backup")),
        Expect::apply_status(STATUS),
        Expect::event(NS),
    ];
    let (result, seen) = run(pg, cache.clone(), bucket.clone(), script).await;
    assert_eq!(
        result.expect_err("retried with backoff").reason(),
        "StoreUnreachable"
    );
    assert_eq!(condition(&seen[1].body, "Cleanup")["status"], "False");
    assert_eq!(
        condition(&seen[1].body, "Cleanup")["reason"],
        "StoreUnreachable"
    );
    assert!(
        condition(&seen[1].body, "Cleanup")["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Retain"),
        "the message says how to release the cluster"
    );
    assert_eq!(seen[2].body["type"], "Warning");

    // Switching to Retain releases it without touching the bucket.
    let (retain, _) = deleting("Retain");
    let script = vec![Expect::patch_cluster(CLUSTER), Expect::event(NS)];
    let (_, seen) = run(retain, cache, bucket.clone(), script).await;
    assert_eq!(seen[1].body["reason"], "BackupsRetained");
    bucket.set_unreachable(false);
    assert_eq!(bucket.keys().len(), 5);
}
