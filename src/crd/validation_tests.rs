//! The table of invalid specs: each is rejected with a message that names the field. CEL rules
//! run client-side through kube's CEL evaluator, the same rules the API server enforces.

use kube::core::cel::validate_cel;
use serde_json::{Value, json};

use super::PostgreSQL;
use crate::clusters::validate::validate;

/// Everything that would reject `spec` for a PostgreSQL named `name`: schema types and enums
/// (through serde), CEL rules, and the operator's own validation.
fn rejections(name: &str, spec: Value) -> Vec<String> {
    let object = json!({
        "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
        "metadata": {"name": name, "namespace": "prod"},
        "spec": spec,
    });
    let pg: PostgreSQL = match serde_json::from_value(object) {
        Ok(pg) => pg,
        Err(e) => return vec![format!("schema: {e}")],
    };
    let mut errors: Vec<String> = match validate_cel(&pg) {
        Ok(()) => vec![],
        Err(errs) => errs
            .as_slice()
            .iter()
            .map(|e| format!("{}: {}", e.field_path, e.message))
            .collect(),
    };
    if let Err(e) = validate(&pg.spec) {
        errors.push(e.to_string());
    }
    errors
}

fn storage() -> Value {
    json!({"size": "1Gi"})
}

fn s3() -> Value {
    json!({"bucket": "backups", "endpoint": "http://minio:9000", "forcePathStyle": true})
}

fn with_backup(backup: Value) -> Value {
    json!({"storage": storage(), "backup": backup})
}

#[test]
fn valid_specs_pass() {
    assert_eq!(
        rejections("demo", json!({"storage": storage()})),
        Vec::<String>::new()
    );
    let full = with_backup(json!({
        "schedule": "0 2 * * *", "retention": {"keep": 7, "maxAge": "30d", "recoveryWindow": "7d"},
        "compression": "gzip", "onDelete": "Retain", "destination": {"s3": s3()},
        "verify": {"schedule": "0 4 * * 0", "window": "8d", "jobDeadlineSeconds": 7200},
        "walArchive": {"timeoutSeconds": 60, "baseBackupSchedule": "@weekly", "gapAtVolumePercent": 90}
    }));
    assert_eq!(rejections("demo", full), Vec::<String>::new());
    let resources = json!({
        "storage": {"size": "1Gi", "storageClassName": "fast.ssd-1"},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 2, "memory": "1Gi", "ephemeral-storage": "1G"}},
    });
    assert_eq!(rejections("demo", resources), Vec::<String>::new());
    let no_class = json!({"storage": {"size": "1Gi", "storageClassName": ""}});
    assert_eq!(rejections("demo", no_class), Vec::<String>::new());
    let preferred = json!({"storage": storage(), "instances": 3,
        "replication": {"synchronous": {"number": 2, "durability": "preferred"}}});
    assert_eq!(rejections("demo", preferred), Vec::<String>::new());
    for target in [
        json!({}),
        json!({"time": "2026-11-28T10:00:00Z"}),
        json!({"time": "2026-11-28T10:00:00.123456+01:00"}),
        json!({"lsn": "1A/3000060"}),
        json!({"xid": "123456"}),
        json!({"name": "before-migration"}),
    ] {
        let pitr = json!({"storage": storage(), "restore": {"objectStore":
            {"destination": {"s3": s3()}, "cluster": "old"}, "target": target}});
        assert_eq!(rejections("demo", pitr), Vec::<String>::new(), "{target}");
    }
}

#[test]
fn point_in_time_targets_are_checked_at_apply() {
    let pitr = |restore: Value| json!({"storage": storage(), "restore": restore});
    let store = json!({"destination": {"s3": s3()}, "cluster": "old"});
    let cases = [
        (
            pitr(
                json!({"objectStore": store, "target": {"time": "2026-11-28T10:00:00Z", "name": "x"}}),
            ),
            "spec.restore.target takes at most one of time, lsn, xid and name",
        ),
        (
            pitr(json!({"backup": {"name": "b1"}, "target": {}})),
            "replays the WAL archive of spec.restore.objectStore",
        ),
        (
            pitr(json!({"objectStore": store, "target": {"time": "2026-11-28 10:00:00"}})),
            "spec.restore.target.time must be an RFC 3339 time with an offset",
        ),
        (
            pitr(json!({"objectStore": store, "target": {"lsn": "3000060"}})),
            "spec.restore.target.lsn must be a WAL position",
        ),
        (
            pitr(json!({"objectStore": store, "target": {"xid": "12a"}})),
            "spec.restore.target.xid must be a transaction ID",
        ),
    ];
    for (spec, expected) in cases {
        let errors = rejections("demo", spec.clone());
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{spec}: expected {expected:?} in {errors:?}"
        );
    }
}

#[test]
fn the_instances_rule_allows_exactly_max_instances() {
    let allowed =
        |n: i32| rejections("demo", json!({"instances": n, "storage": storage()})).is_empty();
    assert!(allowed(crate::crd::MAX_INSTANCES));
    assert!(!allowed(crate::crd::MAX_INSTANCES + 1));
}

#[test]
fn invalid_specs_are_rejected_with_the_field_named() {
    let long_name = "a".repeat(46);
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "name too long for children",
            &long_name,
            json!({"storage": storage()}),
            "metadata.name must be at most 45 characters",
        ),
        (
            "name not a DNS label",
            "9demo",
            json!({"storage": storage()}),
            "metadata.name must start with a letter",
        ),
        (
            "unsupported major",
            "demo",
            json!({"version": "12", "storage": storage()}),
            "unknown variant `12`",
        ),
        (
            "ten instances",
            "demo",
            json!({"instances": 10, "storage": storage()}),
            "spec.instances must be between 1 and 9",
        ),
        (
            "synchronous quorum as large as the cluster",
            "demo",
            json!({"instances": 2, "replication": {"synchronous": {"number": 2}}, "storage": storage()}),
            "spec.replication.synchronous.number must be less than spec.instances",
        ),
        (
            "synchronous durability neither required nor preferred",
            "demo",
            json!({"instances": 3, "replication": {"synchronous": {"number": 1, "durability": "eventual"}}, "storage": storage()}),
            "unknown variant `eventual`",
        ),
        (
            "zero instances",
            "demo",
            json!({"instances": 0, "storage": storage()}),
            "spec.instances must be between 1 and 9",
        ),
        (
            "storage not a quantity",
            "demo",
            json!({"storage": {"size": "lots"}}),
            "spec.storage.size must be a positive Kubernetes quantity",
        ),
        (
            "storage zero",
            "demo",
            json!({"storage": {"size": "0"}}),
            "spec.storage.size must be a positive Kubernetes quantity",
        ),
        (
            "owned parameter port",
            "demo",
            json!({"storage": storage(), "parameters": {"port": "5433"}}),
            "spec.parameters must not set keys Tusk manages",
        ),
        (
            "owned parameter hba_file",
            "demo",
            json!({"storage": storage(), "parameters": {"hba_file": "/tmp/x"}}),
            "spec.parameters must not set keys Tusk manages",
        ),
        (
            "recovery target",
            "demo",
            json!({"storage": storage(), "parameters": {"recovery_target_time": "2026-11-27 10:00:00"}}),
            "break replication and failover",
        ),
        (
            "recovery_target_action",
            "demo",
            json!({"storage": storage(), "parameters": {"recovery_target_action": "promote"}}),
            "break replication and failover",
        ),
        (
            "recovery_min_apply_delay",
            "demo",
            json!({"storage": storage(), "parameters": {"recovery_min_apply_delay": "1h"}}),
            "break replication and failover",
        ),
        (
            "hot_standby",
            "demo",
            json!({"storage": storage(), "parameters": {"hot_standby": "off"}}),
            "break replication and failover",
        ),
        (
            "fsync",
            "demo",
            json!({"storage": storage(), "parameters": {"fsync": "off"}}),
            "break replication and failover",
        ),
        (
            "full_page_writes",
            "demo",
            json!({"storage": storage(), "parameters": {"full_page_writes": "off"}}),
            "break replication and failover",
        ),
        (
            "archive_mode",
            "demo",
            json!({"storage": storage(), "parameters": {"archive_mode": "on"}}),
            "break replication and failover",
        ),
        (
            "synchronous_commit off",
            "demo",
            json!({"storage": storage(), "parameters": {"synchronous_commit": "off"}}),
            "synchronous_commit may be on or remote_apply",
        ),
        (
            "wal_level minimal",
            "demo",
            json!({"storage": storage(), "parameters": {"wal_level": "minimal"}}),
            "wal_level may be replica or logical",
        ),
        (
            "max_wal_senders 0",
            "demo",
            json!({"storage": storage(), "parameters": {"max_wal_senders": "0"}}),
            "must be at least 10",
        ),
        (
            "max_replication_slots 0",
            "demo",
            json!({"storage": storage(), "parameters": {"max_replication_slots": "0"}}),
            "must be at least 10",
        ),
        (
            "owner tusk_replication",
            "demo",
            json!({"storage": storage(), "bootstrap": {"database": "app", "owner": "tusk_replication"}}),
            "not starting with pg_ or tusk_",
        ),
        (
            "parameter name with spaces",
            "demo",
            json!({"storage": storage(), "parameters": {"work mem": "1MB"}}),
            "spec.parameters keys must be postgresql.conf names",
        ),
        (
            "multi-line parameter",
            "demo",
            json!({"storage": storage(), "parameters": {"work_mem": "1MB\nport = 1"}}),
            "spec.parameters values must be single-line",
        ),
        (
            "no destination",
            "demo",
            with_backup(json!({"schedule": "@daily", "destination": {}})),
            "exactly one of s3 or gcs must be set",
        ),
        (
            "two destinations",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "destination": {"s3": s3(), "gcs": {"bucket": "b-gcs"}}}),
            ),
            "exactly one of s3 or gcs must be set",
        ),
        (
            "bad bucket",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "destination": {"s3": {"bucket": "Bad_Bucket"}}}),
            ),
            "must be a valid bucket name",
        ),
        (
            "endpoint not a URL",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "destination": {"s3": {"bucket": "backups", "endpoint": "minio:9000"}}}),
            ),
            "must be an http:// or https:// URL",
        ),
        (
            "path escapes",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "destination": {"s3": {"bucket": "backups", "path": "a/../b"}}}),
            ),
            "must be a relative prefix",
        ),
        (
            "schedule with six fields",
            "demo",
            with_backup(json!({"schedule": "0 0 2 * * *", "destination": {"s3": s3()}})),
            "spec.backup.schedule",
        ),
        (
            "schedule out of range",
            "demo",
            with_backup(json!({"schedule": "61 2 * * *", "destination": {"s3": s3()}})),
            "spec.backup.schedule \"61 2 * * *\" is not a valid Kubernetes cron schedule",
        ),
        (
            "day of week 7, which the CronJob API refuses",
            "demo",
            with_backup(json!({"schedule": "0 0 * * 7", "destination": {"s3": s3()}})),
            "spec.backup.schedule must be a Kubernetes CronJob schedule",
        ),
        (
            "memory limit not a quantity",
            "demo",
            json!({"storage": storage(), "resources": {"limits": {"memory": "lots"}}}),
            "spec.resources limits and requests must be non-negative Kubernetes quantities",
        ),
        (
            "negative cpu request",
            "demo",
            json!({"storage": storage(), "resources": {"requests": {"cpu": -1}}}),
            "spec.resources limits and requests must be non-negative Kubernetes quantities",
        ),
        (
            "request above limit",
            "demo",
            json!({"storage": storage(), "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}),
            "spec.resources.requests must not exceed spec.resources.limits",
        ),
        (
            "resource a container cannot have",
            "demo",
            json!({"storage": storage(), "resources": {"limits": {"storage": "1Gi"}}}),
            "spec.resources may only name cpu, memory and ephemeral-storage",
        ),
        (
            "storage class not a name",
            "demo",
            json!({"storage": {"size": "1Gi", "storageClassName": "Fast SSD"}}),
            "spec.storage.storageClassName must be a StorageClass name",
        ),
        (
            "secret name not a name",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "destination": {"s3": {"bucket": "backups",
                "credentials": {"accessKeyId": {"name": "My_Secret", "key": "id"}, "secretAccessKey": {"name": "s", "key": "k"}}}}}),
            ),
            "must be a Secret name",
        ),
        (
            "secret key not a key",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "destination": {"gcs": {"bucket": "backups",
                "credentials": {"serviceAccountKey": {"name": "gcs", "key": "../key.json"}}}}}),
            ),
            "must be a Secret key",
        ),
        (
            "restore from a Backup that cannot exist",
            "demo",
            json!({"storage": storage(), "restore": {"backup": {"name": "Nightly 1"}}}),
            "name must be an object name",
        ),
        (
            "keep zero",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "retention": {"keep": 0}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.retention.keep must be at least 1",
        ),
        (
            "maxAge unit",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "retention": {"maxAge": "30 days"}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.retention.maxAge must be a number followed by h, d or w",
        ),
        (
            "recoveryWindow unit",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "retention": {"recoveryWindow": "1 week"}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.retention.recoveryWindow must be a number followed by h, d or w",
        ),
        (
            "baseBackupSchedule",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "walArchive": {"baseBackupSchedule": "nightly"}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.walArchive.baseBackupSchedule must be a Kubernetes CronJob schedule",
        ),
        (
            "verify window unit",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "verify": {"schedule": "@weekly", "window": "8 days"}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.verify.window must be a number followed by h, d or w",
        ),
        (
            "verify schedule",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "verify": {"schedule": "weekly"}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.verify.schedule must be a Kubernetes CronJob schedule",
        ),
        (
            "verify schedule range",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "verify": {"schedule": "0 4 * * 5-3"}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.verify.schedule \"0 4 * * 5-3\" is not a valid",
        ),
        (
            "verify deadline",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "verify": {"schedule": "@weekly", "jobDeadlineSeconds": 10}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.verify.jobDeadlineSeconds must be at least 60",
        ),
        (
            "archive timeout of zero",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "walArchive": {"timeoutSeconds": 0}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.walArchive.timeoutSeconds must be between 1 and 3600",
        ),
        (
            "a disk policy that gives way too early",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "walArchive": {"gapAtVolumePercent": 30}, "destination": {"s3": s3()}}),
            ),
            "spec.backup.walArchive.gapAtVolumePercent must be between 50 and 100",
        ),
        (
            "unknown compression",
            "demo",
            with_backup(
                json!({"schedule": "@daily", "compression": "lz4", "destination": {"s3": s3()}}),
            ),
            "unknown variant `lz4`",
        ),
        (
            "restore from two sources",
            "demo",
            json!({"storage": storage(), "restore": {"backup": {"name": "b1"}, "objectStore": {"destination": {"s3": s3()}, "cluster": "old"}}}),
            "spec.restore needs exactly one of backup or objectStore",
        ),
        (
            "reserved database",
            "demo",
            json!({"storage": storage(), "bootstrap": {"database": "template1"}}),
            "spec.bootstrap.database must be a lowercase identifier",
        ),
        (
            "superuser as owner",
            "demo",
            json!({"storage": storage(), "bootstrap": {"owner": "postgres"}}),
            "spec.bootstrap.owner must be a lowercase identifier",
        ),
        (
            "image with spaces",
            "demo",
            json!({"storage": storage(), "image": "postgres 18"}),
            "spec.image must be an image reference",
        ),
    ];
    assert!(cases.len() >= 15);
    for (what, name, spec, expected) in cases {
        let errors = rejections(name, spec);
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{what}: expected a rejection containing {expected:?}, got {errors:?}"
        );
    }
}

mod names;
mod schedules;
mod transitions;

#[test]
fn declared_roles_and_databases_are_checked_at_apply() {
    let with = |roles: Value, databases: Value| json!({"storage": storage(), "roles": roles, "databases": databases});
    let full = with(
        json!([
            {"name": "app_reader", "inRoles": ["pg_read_all_data"], "connectionLimit": 5,
             "validUntil": "2027-06-30T00:00:00Z"},
            {"name": "writers", "login": false, "createDb": true},
            {"name": "billing", "passwordSecret": {"name": "billing-password"}},
            {"name": "gone", "ensure": "absent"},
        ]),
        json!([
            {"name": "shop", "owner": "billing", "encoding": "UTF8", "locale": "C.UTF-8",
             "extensions": [{"name": "uuid-ossp"}, {"name": "citext", "version": "1.6", "schema": "sales"}],
             "schemas": [{"name": "sales", "owner": "writers"}]},
            {"name": "old_data", "owner": "app", "ensure": "absent", "dropData": true},
        ]),
    );
    assert_eq!(rejections("demo", full), Vec::<String>::new());
    let cases = [
        (
            with(json!([{"name": "postgres"}]), json!([])),
            "spec.roles[].name must be",
        ),
        (
            with(json!([{"name": "tusk_backup"}]), json!([])),
            "spec.roles[].name must be",
        ),
        (
            with(json!([{"name": "pg_monitor"}]), json!([])),
            "spec.roles[].name must be",
        ),
        (
            with(json!([{"name": "Reader"}]), json!([])),
            "spec.roles[].name must be",
        ),
        (
            with(json!([{"name": "app"}]), json!([])),
            "may not declare the bootstrap owner",
        ),
        (
            with(
                json!([{"name": "g", "login": false, "passwordSecret": {"name": "s"}}]),
                json!([]),
            ),
            "passwordSecret is for a role that logs in",
        ),
        (
            with(json!([{"name": "r", "connectionLimit": -2}]), json!([])),
            "connectionLimit must be -1",
        ),
        (
            with(json!([{"name": "r", "validUntil": "tomorrow"}]), json!([])),
            "validUntil must be an RFC 3339 time",
        ),
        (
            with(json!([{"name": "r", "inRoles": ["postgres"]}]), json!([])),
            "inRoles must name roles",
        ),
        (
            with(
                json!([]),
                json!([{"name": "shop", "owner": "app", "ensure": "absent"}]),
            ),
            "set dropData: true to say so",
        ),
        (
            with(json!([]), json!([{"name": "template1", "owner": "app"}])),
            "spec.databases[].name must be",
        ),
        (
            with(json!([]), json!([{"name": "shop", "owner": "tusk_backup"}])),
            "spec.databases[].owner must be",
        ),
        (
            with(
                json!([]),
                json!([{"name": "shop", "owner": "app", "extensions": [{"name": "x; DROP"}]}]),
            ),
            "extensions[].name must be an extension name",
        ),
        (
            with(
                json!([]),
                json!([{"name": "shop", "owner": "app", "schemas": [{"name": "pg_temp"}]}]),
            ),
            "schemas[].name must be a lowercase identifier, not starting with pg_",
        ),
    ];
    for (spec, expected) in cases {
        let errors = rejections("demo", spec.clone());
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{spec}: expected {expected:?} in {errors:?}"
        );
    }
    let owner = json!({"storage": storage(), "bootstrap": {"owner": "shop_owner"},
        "roles": [{"name": "app"}, {"name": "shop_owner"}]});
    let errors = rejections("demo", owner);
    assert_eq!(
        errors.len(),
        1,
        "only the declared bootstrap owner: {errors:?}"
    );
}

#[test]
fn client_services_may_be_disabled_except_rw_and_ro_under_a_read_only_pooler() {
    let with = |services: Value, pooler: Value| {
        rejections(
            "demo",
            json!({"storage": storage(), "instances": 2, "services": services, "pooler": pooler}),
        )
    };
    let none = Value::Null;
    assert_eq!(
        with(json!({"disabled": ["ro", "r"]}), none.clone()),
        Vec::<String>::new()
    );
    assert_eq!(
        with(json!({}), json!({"readOnly": true})),
        Vec::<String>::new()
    );
    assert_eq!(
        with(json!({"disabled": ["r"]}), json!({"readOnly": true})),
        Vec::<String>::new()
    );
    let errors = with(json!({"disabled": ["ro"]}), json!({"readOnly": true}));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("spec.pooler.readOnly routes to the replicas")),
        "{errors:?}"
    );
    let errors = with(json!({"disabled": ["rw"]}), none);
    assert!(
        errors.iter().any(|e| e.contains("unknown variant `rw`")),
        "{errors:?}"
    );
}
