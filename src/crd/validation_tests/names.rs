//! The agent's name rules, seen from the CRD: every row of `tests/contracts/names.json` goes
//! through the CEL rules of every field it can appear in. The agent's side runs the same table
//! (`backup-store/src/names.rs`), so both accept exactly the same strings.
//!
//! The rules are evaluated from the generated CRD by kube's CEL evaluator rather than by a real
//! API server: every row runs in milliseconds in `cargo test`, and a rule that the evaluator and
//! the API server read differently is caught by e2e/tests/invalid_specs.rs, which sends some of
//! these rows to a real one.

use kube::core::cel::validate_cel;
use serde_json::{Value, json};

use crate::crd::fixtures;

const TABLE: &str = include_str!("../../../tests/contracts/names.json");

/// CEL messages for a PostgreSQL named `name` with `spec`.
fn postgresql_errors(name: &str, spec: Value) -> Vec<String> {
    let pg = fixtures::postgresql("prod", name, spec, Value::Null);
    validate_cel(&pg).err().map_or(vec![], |errors| {
        errors
            .as_slice()
            .iter()
            .map(|e| e.message.clone())
            .collect()
    })
}

fn restore_from(object_store: Value) -> Value {
    json!({"storage": {"size": "1Gi"}, "restore": {"objectStore": object_store}})
}

fn backup_to(path: &str, store: &str) -> Value {
    json!({"storage": {"size": "1Gi"}, "backup": {"schedule": "@daily",
        "destination": {store: {"bucket": "backups", "path": path}}}})
}

/// For each field of the CRD where a `field` value of the table ends up: whether CEL accepts it.
fn crd_verdicts(field: &str, value: &str) -> Vec<(&'static str, bool)> {
    let s3 = json!({"s3": {"bucket": "backups"}});
    let ok = |errors: Vec<String>| errors.is_empty();
    match field {
        "cluster" => {
            let backup = fixtures::backup("prod", "b1", value, Value::Null);
            vec![
                ("Backup spec.cluster.name", validate_cel(&backup).is_ok()),
                (
                    "spec.restore.objectStore.cluster",
                    ok(postgresql_errors(
                        "demo",
                        restore_from(json!({"destination": s3, "cluster": value})),
                    )),
                ),
                (
                    "PostgreSQL metadata.name",
                    ok(postgresql_errors(
                        value,
                        json!({"storage": {"size": "1Gi"}}),
                    )),
                ),
            ]
        }
        "namespace" => vec![(
            "spec.restore.objectStore.namespace",
            ok(postgresql_errors(
                "demo",
                restore_from(json!({"destination": s3, "cluster": "old", "namespace": value})),
            )),
        )],
        "path" => vec![
            (
                "spec.backup.destination.s3.path",
                ok(postgresql_errors("demo", backup_to(value, "s3"))),
            ),
            (
                "spec.backup.destination.gcs.path",
                ok(postgresql_errors("demo", backup_to(value, "gcs"))),
            ),
        ],
        "backupId" => vec![(
            "spec.restore.objectStore.backupId",
            ok(postgresql_errors(
                "demo",
                restore_from(json!({"destination": s3, "cluster": "old", "backupId": value})),
            )),
        )],
        other => panic!("unknown field {other} in names.json"),
    }
}

#[test]
fn the_crd_accepts_exactly_the_names_the_agent_accepts() {
    let rows = backup_store::names::contract_rows(TABLE).unwrap();
    assert!(rows.len() >= 40);
    for row in rows {
        let value = row.value();
        for (where_, verdict) in crd_verdicts(&row.field, &value) {
            assert_eq!(verdict, row.accepted, "{where_} {value:?}: {}", row.why);
        }
    }
}
