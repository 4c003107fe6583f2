//! Transition rules: what may not change once a cluster or Backup exists (restore source,
//! storage shrinking or class, bootstrap, a Backup's spec), checked with the old object.

use serde_json::{Value, json};

use super::super::{Backup, PostgreSQL, fixtures};
use super::storage;

/// A PostgreSQL named demo with `spec`, as stored.
fn stored(spec: Value) -> PostgreSQL {
    fixtures::postgresql("prod", "demo", spec, Value::Null)
}

/// The messages of the transition rules that refuse updating `old` to `new`.
fn update_messages(new: &PostgreSQL, old: &PostgreSQL) -> Vec<String> {
    match kube::core::cel::validate_cel_update(new, old) {
        Ok(()) => vec![],
        Err(errs) => errs.as_slice().iter().map(|e| e.message.clone()).collect(),
    }
}

/// Asserts that one of `messages` names `rule`.
fn assert_refused(messages: &[String], rule: &str) {
    assert!(
        messages.iter().any(|m| m.contains(rule)),
        "no message names {rule:?}: {messages:?}"
    );
}

#[test]
fn restore_cannot_be_added_or_changed_after_creation() {
    let pg = stored;
    let plain = pg(json!({"storage": storage()}));
    let restored = pg(json!({"storage": storage(), "restore": {"backup": {"name": "b1"}}}));
    let other = pg(json!({"storage": storage(), "restore": {"backup": {"name": "b2"}}}));
    let messages = update_messages;
    assert_refused(
        &messages(&restored, &plain),
        "spec.restore can only be set when the cluster is created",
    );
    assert_refused(&messages(&other, &restored), "spec.restore is immutable");
    assert_eq!(messages(&restored, &restored), Vec::<String>::new());
}

#[test]
fn the_version_rises_above_the_serving_major_or_returns_to_it_and_never_goes_below() {
    let at = |version: &str, serving: Option<i32>| {
        let status = serving.map_or(Value::Null, |major| json!({"version": major}));
        let spec = json!({"version": version, "storage": storage()});
        fixtures::postgresql("prod", "demo", spec, status)
    };
    let refused = "spec.version can only rise above the major the cluster serves";
    // Upgrades, skipping a major or not, and a cancel back to the serving major.
    for (new, old) in [("16", "15"), ("17", "15"), ("15", "17"), ("16", "17")] {
        let changed = update_messages(&at(new, Some(15)), &at(old, Some(15)));
        assert_eq!(changed, Vec::<String>::new(), "{old} -> {new}");
    }
    // Below the serving major, or before the operator recorded it.
    assert_refused(
        &update_messages(&at("14", Some(15)), &at("15", Some(15))),
        refused,
    );
    assert_refused(
        &update_messages(&at("15", Some(17)), &at("17", Some(17))),
        refused,
    );
    assert_refused(&update_messages(&at("17", None), &at("15", None)), refused);
}

#[test]
fn storage_only_grows_and_keeps_its_class_and_bootstrap_is_immutable() {
    let messages = |new: Value, old: Value| update_messages(&stored(new), &stored(old));
    let sized = |size: &str| json!({"storage": {"size": size}});
    assert_eq!(messages(sized("2Gi"), sized("1Gi")), Vec::<String>::new());
    assert_eq!(
        messages(sized("1024Mi"), sized("1Gi")),
        Vec::<String>::new()
    );
    let shrunk = messages(sized("1000Mi"), sized("1Gi"));
    assert_refused(&shrunk, "spec.storage.size cannot shrink");
    let classed = |class: &str| json!({"storage": {"size": "1Gi", "storageClassName": class}});
    assert_eq!(
        messages(classed("fast"), classed("fast")),
        Vec::<String>::new()
    );
    for (new, old) in [
        (classed("slow"), classed("fast")),
        (classed("fast"), sized("1Gi")),
        (sized("1Gi"), classed("fast")),
    ] {
        let refused = messages(new, old);
        assert_refused(&refused, "spec.storage.storageClassName cannot be changed");
    }
    let owned = |owner: &str| json!({"storage": storage(), "bootstrap": {"database": "app", "owner": owner}});
    let changed = messages(owned("other"), owned("app"));
    assert_refused(&changed, "spec.bootstrap cannot be changed");
}

#[test]
fn a_backup_spec_is_immutable() {
    let backup = |cluster: &str| fixtures::backup("prod", "b1", cluster, Value::Null);
    assert!(kube::core::cel::validate_cel(&backup("demo")).is_ok());
    assert!(kube::core::cel::validate_cel(&backup("")).is_err());
    // The cluster's name becomes the agent's path segment and Job names: refused, not Pending.
    for not_a_cluster_name in ["Demo", "demo_1", "9demo", "demo.x", "demo-"] {
        let err = kube::core::cel::validate_cel(&backup(not_a_cluster_name)).unwrap_err();
        assert!(
            err.as_slice()[0]
                .message
                .contains("spec.cluster.name must be the name of a PostgreSQL")
        );
    }
    let err = kube::core::cel::validate_cel_update(&backup("other"), &backup("demo")).unwrap_err();
    assert!(
        err.as_slice()
            .iter()
            .any(|e| e.message.contains("a Backup's spec is immutable"))
    );
}

#[test]
fn a_backup_name_must_work_as_job_name_and_backup_id() {
    let named = |name: &str| fixtures::backup("prod", name, "demo", Value::Null);
    let messages = |b: &Backup| -> Vec<String> {
        match kube::core::cel::validate_cel(b) {
            Ok(()) => vec![],
            Err(errs) => errs.as_slice().iter().map(|e| e.message.clone()).collect(),
        }
    };
    assert_eq!(messages(&named(&"a".repeat(63))), Vec::<String>::new());
    assert!(messages(&named(&"a".repeat(64)))[0].contains("at most 63 characters"));
    assert!(messages(&named("latest"))[0].contains("must not be 'latest'"));
}
