//! Mock-API scenarios pinning the exact API calls of a reconcile.

mod support;

use std::time::Duration;

use http::{Method, StatusCode};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use support::paths::{
    CLUSTER, CONFIG_MAPS, CRONJOBS, LEASES, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS,
    SERVICES, STATEFULSETS, STATUS,
};
use support::read::{applied, condition, event_reason};
use support::run::{scenario, scenario_result};
use support::verifier::{self, Expect};
use support::world::*;
use tusk::clusters::status::BackupSchedule;
use tusk::crd::PostgreSQL;

#[tokio::test]
async fn create_from_empty_makes_exactly_these_calls() {
    let pg = postgresql(WITH_BACKUP);
    let script = verifier::steps([
        vec![
            // The primary Lease first (held by ordinal 0, which initialises the database): the
            // primary step runs before anything else.
            Expect::create(LEASES),
            // The cleanup finalizer before any other child, so a deletion can never skip
            // backup.onDelete.
            Expect::patch_cluster(CLUSTER),
            // No `-rw` EndpointSlice yet: it is written once the primary's pod serves.
            // The cluster's CA, then the server certificate it signs: created, not read first
            // (a create never overwrites; nothing is cached, so nothing is known to exist).
            Expect::create(SECRETS),
            Expect::create(SECRETS),
        ],
        // The credentials, which carry that CA, together, and the CA published without a key.
        verifier::together(vec![
            Expect::create(SECRETS),
            Expect::create(SECRETS),
            Expect::create(SECRETS),
            Expect::create(SECRETS),
            Expect::apply(format!("{CONFIG_MAPS}/demo-ca.crt")),
        ]),
        // The verifiers of the passwords just created, known without a read.
        vec![Expect::create(SECRETS)],
        // Everything the StatefulSet does not wait for, together; the database pods' identity
        // is their Lease and nothing else.
        verifier::together(vec![
            Expect::apply(format!("{CONFIG_MAPS}/demo-config")),
            Expect::apply(format!("{SERVICES}/demo-rw")),
            Expect::apply(format!("{SERVICES}/demo-ro")),
            Expect::apply(format!("{SERVICES}/demo-r")),
            Expect::apply(format!("{SERVICES}/demo-hl")),
            Expect::apply(format!("{SERVICE_ACCOUNTS}/demo-instance")),
            Expect::apply(format!("{ROLES}/demo-instance")),
        ]),
        vec![
            // The binding once its Role exists: the API server refuses to bind a missing Role.
            Expect::apply(format!("{ROLE_BINDINGS}/demo-instance")),
            // Answered without status: the pods are not ready yet, so no CronJob is created.
            Expect::apply(format!("{STATEFULSETS}/demo")),
            // No Event lists the children: the user has just applied the cluster (a thousand
            // at once would be a thousand Events); the status says what exists.
            Expect::apply_status(STATUS),
        ],
    ]);
    let (action, seen) = scenario(pg, Cache::default(), script).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(600)));

    // Tested for absence first: a finalizer another controller added meanwhile is never lost.
    assert_eq!(
        seen[1].body,
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["tusk.dev/cleanup"]},
        ])
    );
    let seen = seen[2..].to_vec();
    for apply in seen.iter().filter(|s| s.method == Method::PATCH) {
        assert!(
            apply.query.contains("fieldManager=tusk-operator"),
            "{}",
            apply.query
        );
        assert!(apply.query.contains("force=true"), "{}", apply.query);
    }
    let created = |name: &str| {
        let found = seen
            .iter()
            .find(|s| s.method == Method::POST && s.body["metadata"]["name"] == name);
        found
            .unwrap_or_else(|| panic!("{name} created"))
            .body
            .clone()
    };
    let secret = created("demo-superuser");
    let password = secret["data"]["password"].as_str().expect("password set");
    assert_eq!(
        password.len(),
        44,
        "32 random bytes of alphanumerics, base64-encoded"
    );
    assert_ne!(
        secret["data"]["password"],
        created("demo-app")["data"]["password"]
    );
    // The credentials carry the CA the server certificate was signed with.
    let (ca, server) = (created("demo-ca"), created("demo-server-tls"));
    assert_eq!(seen[0].body["metadata"]["name"], "demo-ca", "the CA first");
    assert_eq!(secret["data"]["ca.crt"], ca["data"]["ca.crt"]);
    assert_eq!(
        secret["metadata"]["annotations"]["tusk.dev/ca-sha256"],
        server["metadata"]["annotations"]["tusk.dev/ca-sha256"]
    );

    // The CA published without its key, and each password declared by its verifier alone.
    assert_eq!(
        applied(&seen, "demo-ca.crt")["data"],
        json!({"ca.crt": decoded(&ca["data"]["ca.crt"])})
    );
    let verifiers = created("demo-verifiers");
    for (slot, owner) in [("superuser", "demo-superuser"), ("app", "demo-app")] {
        let password = decoded(&created(owner)["data"]["password"]);
        let verifier = decoded(&verifiers["data"][slot]);
        assert!(verifier.starts_with("SCRAM-SHA-256$4096:") && !verifier.contains(&password));
        assert_eq!(
            verifiers["metadata"]["annotations"][format!("tusk.dev/{slot}-password-sha256")],
            tusk::resources::verifiers::password_digest(password.as_bytes())
        );
    }
    assert!(
        !seen.iter().any(|s| s.path.ends_with("/events")),
        "a new cluster's children are not announced"
    );

    let status = &seen.last().expect("status patch").body;
    assert_eq!(status["status"]["phase"], "Provisioning");
    assert_eq!(status["status"]["observedGeneration"], 1);
    assert_eq!(status["status"]["endpoint"], "demo-rw.prod.svc:5432");
    assert_eq!(status["status"]["currentPrimary"], "demo-0");
    assert_eq!(condition(status, "Ready")["status"], "False");
    assert_eq!(
        condition(status, "BackupScheduled")["reason"],
        "WaitingForReady"
    );
}

#[tokio::test]
async fn steady_state_makes_no_write_calls() {
    let (pg, cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    // No script: any request at all fails the reconcile.
    let (action, seen) = scenario(pg, cache, vec![]).await;
    assert_eq!(verifier::writes(&seen).len(), 0);
    assert_eq!(seen.len(), 0);
    assert_eq!(action, Action::requeue(Duration::from_secs(600)));
}

#[tokio::test]
async fn backups_turn_overdue_without_any_other_event() {
    let (mut pg, cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    // Nightly backups scheduled since 1970 and none ever succeeded (skipped or stuck runs leave
    // no failed Backup behind).
    let status = pg.status.as_mut().expect("converged status");
    for condition in &mut status.conditions {
        condition.last_transition_time = at(1_000);
    }
    let script = vec![Expect::apply_status(STATUS), Expect::event(NS)];
    let (_, seen) = scenario(pg, cache, script).await;
    let last = condition(&seen[0].body, "LastBackupSucceeded");
    assert_eq!(last["status"], "False");
    assert_eq!(last["reason"], "BackupOverdue");
    assert_eq!(
        last["message"],
        "no backup has succeeded since 1970-01-01T00:16:40Z, although schedule \"0 2 * * *\" was \
         due at 1970-01-01T02:00:00Z and 1970-01-02T02:00:00Z"
    );
    assert_eq!(seen[1].body["type"], "Warning");
    assert_eq!(event_reason(&seen[1]), "BackupOverdue");
}

/// A cluster with backups that has never been Ready, so it has no CronJob yet; its StatefulSet
/// is `ready` now or not.
fn never_ready_yet(ready: bool) -> (PostgreSQL, Cache) {
    let mut pg = with_finalizer(postgresql(WITH_BACKUP));
    let mut cache = Cache::converged(&pg, ready);
    cache.cronjobs.clear();
    not_ready_status(&mut pg, BackupSchedule::WaitingForReady);
    (with_certificate_times(pg, &cache), cache)
}

/// The CronJob is applied and announced, then the status is written (and announced too when
/// readiness changed).
fn cronjob_then_status(readiness_event: bool) -> Vec<Expect> {
    let mut script = vec![
        Expect::apply(format!("{CRONJOBS}/demo-backup")),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ];
    if readiness_event {
        script.push(Expect::event(NS));
    }
    script
}

#[tokio::test]
async fn cronjob_is_created_only_once_ready() {
    let (pg, cache) = never_ready_yet(true);
    let script = cronjob_then_status(true);
    let (_, seen) = scenario(pg, cache, script).await;
    let cronjob = &seen[0].body;
    assert_eq!(cronjob["spec"]["suspend"], false);
    assert_eq!(cronjob["spec"]["concurrencyPolicy"], "Forbid");
    let pod = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    // The server's own pg_dump: the cluster's image runs the agent its init container copies.
    assert_eq!(
        pod["containers"][0]["image"],
        "docker.io/library/postgres:18"
    );
    assert_eq!(pod["initContainers"][0]["image"], AGENT_IMAGE);
    assert_eq!(pod["containers"][0]["args"], json!(["backup"]));
    let status = &seen[2].body;
    assert_eq!(status["status"]["phase"], "Ready");
    assert_eq!(condition(status, "Ready")["status"], "True");
    assert_eq!(condition(status, "BackupScheduled")["status"], "True");
    assert_eq!(event_reason(&seen[3]), "Ready");
}

#[tokio::test]
async fn no_cronjob_while_never_ready() {
    let (pg, cache) = never_ready_yet(false);
    let (_, seen) = scenario(pg, cache, vec![]).await;
    assert!(seen.is_empty(), "nothing to write while waiting: {seen:?}");
}

#[tokio::test]
async fn cronjob_is_suspended_when_ready_turns_false() {
    let (pg, mut cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    cache.statefulsets = Cache::converged(&pg, false).statefulsets;
    let script = cronjob_then_status(true);
    let (_, seen) = scenario(pg, cache, script).await;
    assert_eq!(seen[0].body["spec"]["suspend"], true);
    assert_eq!(seen[1].body["note"], "Updated CronJob demo-backup");
    let status = &seen[2].body;
    assert_eq!(status["status"]["phase"], "Degraded");
    assert_eq!(condition(status, "Ready")["status"], "False");
    assert_eq!(
        condition(status, "BackupScheduled")["reason"],
        "WaitingForReady"
    );
    assert_eq!(event_reason(&seen[3]), "NotReady");
}

#[tokio::test]
async fn condition_transition_times_are_preserved() {
    let (mut pg, cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    // The user pauses backups: BackupScheduled flips, Ready does not.
    pg.spec.backup.as_mut().expect("backup").suspend = true;
    pg.metadata.generation = Some(2);
    let script = cronjob_then_status(false);
    let (_, seen) = scenario(pg, cache, script).await;
    let status = &seen[2].body;
    let ready = condition(status, "Ready");
    assert_eq!(ready["lastTransitionTime"], "1970-01-01T00:16:40Z");
    assert_eq!(ready["observedGeneration"], 2);
    let backup = condition(status, "BackupScheduled");
    assert_eq!(backup["status"], "False");
    assert_eq!(backup["reason"], "Suspended");
    assert_ne!(backup["lastTransitionTime"], "1970-01-01T00:16:40Z");
}

/// A reconcile can start from a cached copy older than the server's (the previous reconcile's
/// own status write not in the cache yet). Its status goes with that copy's resourceVersion, so
/// the server refuses it rather than let it undo the newer status; the refusal is neither a
/// Warning nor backed off: the reconcile runs again at once, from the newer copy.
#[tokio::test]
async fn a_status_computed_from_a_stale_copy_is_refused_and_retried_quietly() {
    let (mut pg, cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    pg.spec.backup.as_mut().expect("backup").suspend = true;
    pg.metadata.generation = Some(2);
    pg.metadata.resource_version = Some("7".into());
    let conflict = |_: &Value| {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "code": 409, "reason": "Conflict",
            "message": "the object has been modified; please apply your changes to the latest \
                        version and try again"});
        (StatusCode::CONFLICT, status)
    };
    let mut script = cronjob_then_status(false);
    script.pop();
    script.push(Expect::new(Method::PATCH, STATUS, conflict));
    let (result, seen) = scenario_result(pg, cache, script).await;
    assert_eq!(
        result.expect("not a failure"),
        Action::requeue(Duration::from_millis(200))
    );
    assert_eq!(seen[2].body["metadata"]["resourceVersion"], "7");
    assert_eq!(seen.len(), 3, "no Warning Event after the refusal");
}

#[tokio::test]
async fn removing_the_backup_policy_deletes_the_cronjob() {
    let (mut pg, cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    pg.spec.backup = None;
    let script = vec![
        // Nothing to clean up without a destination: the finalizer goes.
        Expect::patch_cluster(CLUSTER),
        Expect::delete(format!("{CRONJOBS}/demo-backup")),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    assert_eq!(
        seen[0].body[1],
        json!({"op": "replace", "path": "/metadata/finalizers", "value": []})
    );
    assert_eq!(seen[2].body["note"], "Deleted CronJob demo-backup");
    assert_eq!(
        condition(&seen[3].body, "BackupScheduled")["reason"],
        "NotConfigured"
    );
}

/// Specs the API server let through (a range CEL cannot order, a cluster stored before the
/// parameter rules existed) are refused before any child is written: only status and an Event.
#[tokio::test]
async fn an_invalid_spec_fails_before_any_child_without_retrying() {
    let cases = [
        (
            WITH_BACKUP.replace("0 2 * * *", "0 0 L * *"),
            "spec.backup.schedule",
        ),
        (
            WITH_BACKUP.replace("0 2 * * *", "0 0 * * 5-3"),
            "spec.backup.schedule",
        ),
        (
            format!("{MINIMAL}\nparameters: {{archive_command: 'curl x | sh'}}"),
            "spec.parameters.archive_command",
        ),
        (
            format!("{MINIMAL}\nparameters: {{log_line_prefix: \"a\\x00b\"}}"),
            "spec.parameters.log_line_prefix must be a single line",
        ),
    ];
    for (spec, message) in cases {
        let script = vec![Expect::apply_status(STATUS), Expect::event(NS)];
        let (action, seen) = scenario(postgresql(&spec), Cache::default(), script).await;
        assert_eq!(action, Action::await_change());
        let status = &seen[0].body;
        assert_eq!(status["status"]["phase"], "Failed");
        let ready = condition(status, "Ready");
        assert_eq!(ready["reason"], "InvalidSpec");
        let text = ready["message"].as_str().unwrap_or_default();
        assert!(text.starts_with(message), "{spec}: {text}");
        assert_eq!(seen[1].body["type"], "Warning");
        assert_eq!(event_reason(&seen[1]), "InvalidSpec");
    }
}

#[tokio::test]
async fn a_failed_apply_is_reported_and_retried_with_growing_backoff() {
    let (pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    cache
        .config_maps
        .retain(|c| c.metadata.name.as_deref() != Some("demo-config"));
    let forbidden = |_: &Value| {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
            "reason": "Forbidden", "message": "configmaps \"demo-config\" is forbidden"});
        (StatusCode::FORBIDDEN, status)
    };
    let script = vec![
        Expect::new(
            Method::PATCH,
            format!("{CONFIG_MAPS}/demo-config"),
            forbidden,
        ),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ];
    let (result, seen) = scenario_result(pg.clone(), cache.clone(), script).await;
    let error = result.expect_err("the apply failed");
    assert_eq!(error.reason(), "ApplyFailed");
    assert_eq!(seen[1].body["type"], "Warning");
    assert_eq!(event_reason(&seen[1]), "ApplyFailed");
    let ready = condition(&seen[2].body, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "ApplyFailed");
    // `kubectl get pg` must not show PHASE Ready next to READY False.
    assert_eq!(seen[2].body["status"]["phase"], "Degraded");
    assert_eq!(
        ready["message"],
        "applying ConfigMap demo-config failed: configmaps \"demo-config\" is forbidden (Forbidden)"
    );

    let (client, _server) = verifier::client();
    let ctx = context(client, &pg, cache);
    let delays: Vec<Duration> = (0..4)
        .map(|_| tusk::clusters::retry_delay(&pg, &ctx))
        .collect();
    assert!(
        delays.windows(2).all(|w| w[1] > w[0]),
        "backoff grows: {delays:?}"
    );
    assert!(delays[0] >= Duration::from_millis(1600) && delays[0] <= Duration::from_millis(2400));
}

#[tokio::test]
async fn a_reconcile_started_before_the_last_status_write_came_back_starts_from_that_write() {
    let (pg, cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    // The copy the cache holds for both reconciles: its status lacks the endpoint, so the first
    // reconcile writes the status, and the watch has not brought that write back when the
    // second starts (as when the echoes of the first one's child writes queue it at once).
    let mut cached = pg.clone();
    cached.metadata.resource_version = Some("41".into());
    if let Some(status) = cached.status.as_mut() {
        status.endpoint = None;
    }
    let cached = std::sync::Arc::new(cached);
    let script = vec![Expect::apply_status(STATUS)];
    let bucket = support::memory_store::MemoryBucket::default();
    let ((first, second), seen) = support::run::against(&pg, cache, bucket, script, |ctx| {
        let reconcile = move |pg| tusk::clusters::reconcile(pg, ctx.clone());
        async move { (reconcile(cached.clone()).await, reconcile(cached).await) }
    })
    .await;
    first.expect("first reconcile");
    second.expect("second reconcile");
    // One status write: the second reconcile started from it, so it had nothing to write (from
    // the cached copy it would have sent the same status again onto version 41, refused as
    // stale by the API server, and run a third time).
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body["metadata"]["resourceVersion"], "41");
    assert_eq!(seen[0].body["status"]["endpoint"], "demo-rw.prod.svc:5432");
}

/// A base64 `data` value of a request body, as text.
fn decoded(value: &Value) -> String {
    let text = value.as_str().expect("base64 text");
    let bytes = base64::Engine::decode(&base64::prelude::BASE64_STANDARD, text).expect("base64");
    String::from_utf8(bytes).expect("UTF-8")
}
