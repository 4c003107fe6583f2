//! The status screen on plain values: a Ready cluster with one backup and a warning.

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::render::render;
use super::summary::{Fetched, summarize};

fn value<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn now() -> Timestamp {
    "2026-11-24T12:00:00Z".parse().unwrap()
}

fn fetched() -> Fetched {
    Fetched {
        pg: value(json!({
            "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
            "metadata": {"name": "shop", "namespace": "prod"},
            "spec": {"version": "18", "storage": {"size": "2Gi"},
                "backup": {"schedule": "0 2 * * *", "verify": {"schedule": "@weekly"},
                    "destination": {"s3": {"bucket": "b", "credentials": {
                        "accessKeyId": {"name": "s", "key": "a"},
                        "secretAccessKey": {"name": "s", "key": "k"}}}}}},
            "status": {"phase": "Ready", "instances": 1, "readyInstances": 1,
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "InstancesReady",
                     "message": "1/1 instances ready", "lastTransitionTime": "2026-11-24T11:50:00Z"},
                    {"type": "BackupVerified", "status": "True", "reason": "Passed",
                     "message": "shop-manual restored and checked", "lastTransitionTime": "2026-11-24T11:58:00Z"}],
                "lastSuccessfulBackup": {"name": "shop-manual", "completedAt": "2026-11-24T11:57:00Z"},
                "lastVerifiedBackup": {"name": "shop-manual", "verifiedAt": "2026-11-24T11:58:00Z"}}
        })),
        pods: vec![value(json!({
            "metadata": {"name": "shop-0", "namespace": "prod"},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "postgres", "image": "postgres:18", "imageID": "",
                    "ready": true, "restartCount": 2}]}
        }))],
        pooler_pods: Vec::new(),
        services: vec![value(json!({
            "metadata": {"name": "shop-rw", "namespace": "prod"},
            "spec": {"ports": [{"port": 5432}]}
        }))],
        backups: vec![value(json!({
            "apiVersion": "tusk.dev/v1alpha1", "kind": "Backup",
            "metadata": {"name": "shop-manual", "namespace": "prod",
                "creationTimestamp": "2026-11-24T11:56:00Z"},
            "spec": {"cluster": {"name": "shop"}},
            "status": {"phase": "Completed", "sizeBytes": 1572864,
                "verification": {"phase": "Passed"}}
        }))],
        events: vec![
            value(json!({
                "metadata": {"name": "e1", "namespace": "prod"},
                "involvedObject": {"kind": "Pod", "name": "shop-0"},
                "type": "Normal", "reason": "Started", "message": "started",
                "lastTimestamp": "2026-11-24T11:49:00Z"
            })),
            value(json!({
                "metadata": {"name": "e0", "namespace": "prod"},
                "involvedObject": {"kind": "Pod", "name": "shop-0"},
                "type": "Warning", "reason": "Unhealthy", "message": "readiness probe failed",
                "count": 2, "lastTimestamp": "2026-11-24T11:45:00Z"
            })),
            value(json!({
                "metadata": {"name": "e2", "namespace": "prod"},
                "involvedObject": {"kind": "Pod", "name": "shop-0"},
                "type": "Warning", "reason": "Unhealthy", "message": "readiness probe failed",
                "count": 3, "lastTimestamp": "2026-11-24T11:49:30Z"
            })),
        ],
    }
}

#[test]
fn screen_shows_phase_conditions_instances_endpoints_backups_schedule_and_warnings() {
    let text = render(&summarize(&fetched(), now()));
    let expected = "\
PostgreSQL prod/shop: Ready, 1/1 instances ready, PostgreSQL 18

Conditions
  TYPE            STATUS  REASON          AGE  MESSAGE
  Ready           True    InstancesReady  10m  1/1 instances ready
  BackupVerified  True    Passed          2m   shop-manual restored and checked

Instances
  NAME    ROLE     READY  PHASE    RESTARTS
  shop-0  primary  true   Running  2

Endpoints
  SERVICE  ADDRESS                PURPOSE
  shop-rw  shop-rw.prod.svc:5432  read-write (primary)

Backups (newest 5)
  NAME         PHASE      SIZE     AGE  VERIFIED  ERROR
  shop-manual  Completed  1.5 MiB  4m   Passed

Schedule:     0 2 * * * (UTC), next run 2026-11-25T02:00:00Z (in 14h); last successful backup: shop-manual (3m ago)
Verification: last verified backup shop-manual at 2026-11-24T11:58:00Z; BackupVerified True (Passed): shop-manual restored and checked

Warning events (newest 5)
  AGE  OBJECT      REASON     COUNT  MESSAGE
  10m  Pod/shop-0  Unhealthy  5      readiness probe failed
";
    assert_eq!(text, expected);
}

#[test]
fn a_new_cluster_without_backups_says_so() {
    let mut f = fetched();
    f.pg.spec.backup = None;
    f.pg.status = None;
    f.pods.clear();
    f.backups.clear();
    f.events.clear();
    let text = render(&summarize(&f, now()));
    assert!(text.starts_with("PostgreSQL prod/shop: Unknown, 0/1 instances ready"));
    assert!(text.contains("Instances\n  (none)\n"), "{text}");
    assert!(
        text.contains("Schedule:     none (no spec.backup)\n"),
        "{text}"
    );
    assert!(text.contains("Verification: none"), "{text}");
}

#[test]
fn a_suspended_schedule_has_no_next_run() {
    let mut f = fetched();
    if let Some(policy) = f.pg.spec.backup.as_mut() {
        policy.suspend = true;
    }
    let summary = summarize(&f, now());
    let schedule = summary.schedule.as_ref().unwrap();
    assert_eq!(schedule.next_run, None);
    assert!(render(&summary).contains("0 2 * * * (UTC), suspended;"));
}

#[test]
fn json_carries_the_same_summary() {
    let json = serde_json::to_value(summarize(&fetched(), now())).unwrap();
    assert_eq!(json["phase"], "Ready");
    assert_eq!(json["pods"][0]["role"], "primary");
    assert_eq!(json["backups"][0]["sizeBytes"], 1572864);
    assert_eq!(json["schedule"]["nextRun"], "2026-11-25T02:00:00Z");
    assert_eq!(json["warnings"][0]["reason"], "Unhealthy");
}

#[test]
fn declared_roles_and_databases_are_listed_only_when_there_are_some() {
    let mut fetched = fetched();
    let plain = render(&summarize(&fetched, now()));
    assert!(!plain.contains("Roles and databases"));
    fetched.pg.status.get_or_insert_default().declared = value(serde_json::json!([
        {"kind": "role", "name": "shop_reader", "state": "Ready"},
        {"kind": "role", "name": "old_batch", "state": "Failed",
         "message": "role \"old_batch\" cannot be dropped because some objects depend on it"},
    ]));
    let text = render(&summarize(&fetched, now()));
    let section = "\
Roles and databases
  KIND  NAME         STATE   MESSAGE
  role  shop_reader  Ready
  role  old_batch    Failed  role \"old_batch\" cannot be dropped because some objects depend on it
";
    assert!(text.contains(section), "{text}");
}

#[test]
fn the_pooler_is_listed_with_its_mode_and_its_service() {
    let mut fetched = fetched();
    assert!(!render(&summarize(&fetched, now())).contains("Pooler"));
    fetched.pg.spec.pooler = Some(Default::default());
    fetched.pooler_pods = vec![
        value(json!({
            "metadata": {"name": "shop-pooler-ro-5c4-q1z", "namespace": "prod",
                "labels": {"app.kubernetes.io/component": "pooler-ro"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        })),
        value(json!({
            "metadata": {"name": "shop-pooler-7d9f-x2x", "namespace": "prod",
                "labels": {"app.kubernetes.io/component": "pooler"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        })),
    ];
    for service in ["shop-pooler-rw", "shop-pooler-ro"] {
        fetched.services.push(value(json!({
            "metadata": {"name": service, "namespace": "prod"},
            "spec": {"ports": [{"port": 5432}]}
        })));
    }
    let text = render(&summarize(&fetched, now()));
    let row = |name: &str| text.lines().find(|l| l.contains(name)).unwrap_or_default();
    assert!(
        row("shop-pooler-7d9f-x2x").contains("PgBouncer, transaction mode, to the primary"),
        "{text}"
    );
    assert!(
        row("shop-pooler-ro-5c4-q1z").contains("PgBouncer, transaction mode, to the replicas"),
        "{text}"
    );
    assert!(
        text.contains("shop-pooler-ro.prod.svc:5432  read-only through the pooler"),
        "{text}"
    );
    assert!(
        text.contains("shop-pooler-rw.prod.svc:5432  read-write through the pooler (PgBouncer)"),
        "{text}"
    );
}

#[test]
fn an_upgrade_in_progress_shows_the_serving_major_and_the_phase() {
    let mut fetched = fetched();
    assert!(!render(&summarize(&fetched, now())).contains("Upgrading from"));
    fetched.pg.spec.version = value(json!("17"));
    fetched.pg.status = fetched.pg.status.take().map(|mut status| {
        status.version = Some(15);
        status.upgrade = Some(value(json!({
            "from": 15, "to": 17, "phase": "Copying", "phaseSince": "2026-11-24T11:59:20Z",
            "fromSet": "shop", "newSet": "shop-v17", "fromImage": "postgres:15",
            "message": "copying every database from shop-0 into shop-v17-0"
        })));
        status
    });
    let summary = summarize(&fetched, now());
    assert_eq!(summary.version, 15, "the serving major, not the spec's");
    let text = render(&summary);
    assert!(
        text.contains(
            "Upgrading from PostgreSQL 15 to 17: Copying for 40s: copying every database from \
             shop-0 into shop-v17-0"
        ),
        "{text}"
    );
}
