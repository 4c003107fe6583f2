use super::*;

fn spec() -> (Vec<DeclaredRole>, Vec<DeclaredDatabase>) {
    let roles = serde_json::from_value(serde_json::json!([
        {"name": "reader"}, {"name": "author", "passwordSecret": {"name": "author-pw"}}
    ]))
    .unwrap();
    let databases =
        serde_json::from_value(serde_json::json!([{"name": "shop", "owner": "author"}])).unwrap();
    (roles, databases)
}

fn object(kind: &str, name: &str, state: &str, message: Option<&str>) -> ObjectState {
    ObjectState {
        kind: kind.into(),
        name: name.into(),
        state: state.into(),
        message: message.map(Into::into),
    }
}

fn handed(report: Vec<ObjectState>) -> Declared {
    Declared::Handed {
        report: Some(report),
        named_secrets: true,
    }
}

#[test]
fn every_object_kept_is_true_and_a_named_secret_is_looked_at_again() {
    let (roles, databases) = spec();
    let report = vec![
        object("role", "reader", "Ready", None),
        object("role", "author", "Ready", None),
        object("database", "shop", "Ready", None),
        object("role", "old_app", "Disabled", None),
    ];
    let status = status(&roles, &databases, &handed(report));
    let condition = status.condition.unwrap();
    assert!(condition.status);
    assert_eq!(condition.message, "2 roles and 1 databases as declared");
    let states: Vec<(&str, &str)> = status
        .objects
        .as_ref()
        .unwrap()
        .iter()
        .map(|o| (o.name.as_str(), o.state.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("reader", "Ready"),
            ("author", "Ready"),
            ("shop", "Ready"),
            ("old_app", "Disabled")
        ]
    );
    assert_eq!(status.recheck, Some(NAMED_SECRET_RECHECK));
}

#[test]
fn a_failure_is_false_with_the_servers_reason_and_a_missing_object_is_pending() {
    let (roles, databases) = spec();
    let report = vec![
        object("role", "reader", "Ready", None),
        object(
            "role",
            "author",
            "Failed",
            Some("role \"author\" cannot be dropped"),
        ),
    ];
    let failed = status(&roles, &databases, &handed(report.clone()));
    let condition = failed.condition.unwrap();
    assert_eq!(
        (condition.status, condition.reason),
        (false, "DeclarationFailed")
    );
    assert_eq!(
        condition.message,
        "role author: role \"author\" cannot be dropped"
    );
    assert_eq!(failed.recheck, Some(FAILED_RECHECK));
    let pending = status(&roles, &databases, &handed(report[..1].to_vec()));
    let condition = pending.condition.unwrap();
    assert_eq!(
        (condition.reason, condition.message.as_str()),
        ("Pending", "2 declared objects not kept yet on the primary")
    );
    assert_eq!(pending.recheck, Some(PENDING_RECHECK));
}

#[test]
fn nothing_declared_removes_the_condition_and_no_report_keeps_the_status() {
    let (roles, databases) = spec();
    let nothing = status(&[], &[], &Declared::Nothing);
    assert!(nothing.condition.is_none() && nothing.objects == Some(Vec::new()));
    let silent = Declared::Handed {
        report: None,
        named_secrets: false,
    };
    let kept = status(&roles, &databases, &silent);
    assert!(kept.objects.is_none(), "the list stays as it was");
    assert_eq!(kept.condition.unwrap().reason, "Pending");
    assert_eq!(kept.recheck, Some(NO_REPORT_RECHECK));
    let waiting = status(
        &roles,
        &databases,
        &Declared::Waiting("role author: Secret author-pw has no key password".into()),
    );
    assert_eq!(waiting.condition.unwrap().reason, "PasswordMissing");
}
