//! Mock-API scenarios for `spec.tls.serverSecret`: a server certificate the user brings. Tusk
//! issues nothing, reads the user's Secret (not its own, so not cached), hands its CA to the
//! credentials, and names the Secret when it is missing or incomplete.

mod support;

use http::{Method, StatusCode};
use serde_json::json;
use support::paths::{SECRETS, STATUS};
use support::read::{condition, event_reason};
use support::run::scenario_result;
use support::verifier::Expect;
use support::world::*;
use tusk::PostgreSQL;
use tusk::clusters::status::BackupSchedule;
use tusk::resources::tls;

const WITH_OWN_CERTIFICATE: &str = "storage: {size: 1Gi}\ntls: {serverSecret: shop-tls}";

/// A converged cluster with `spec.tls.serverSecret`; the cache holds Tusk's Secrets only.
fn converged_with_own_certificate() -> (PostgreSQL, Cache) {
    let (pg, mut cache) = converged(WITH_OWN_CERTIFICATE, true, BackupSchedule::NotConfigured);
    remove_named(&mut cache.secrets, "shop-tls");
    // Tusk's own certificates are not the cluster's: the status shows none.
    let (mut pg, cache) = (pg, cache);
    if let Some(status) = pg.status.as_mut() {
        status.certificates = None;
    }
    (pg, cache)
}

/// The user's Secret as cert-manager writes it (`data` base64), minus `without`.
fn user_secret(without: Option<&str>) -> serde_json::Value {
    let mut data = json!({"tls.crt": "Y2VydA==", "tls.key": "a2V5", "ca.crt": "dXNlciBDQQ=="});
    if let Some(key) = without {
        data.as_object_mut().expect("object").remove(key);
    }
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
           "metadata": {"name": "shop-tls", "namespace": NS}, "data": data})
}

fn get_user_secret(without: Option<&'static str>) -> Expect {
    Expect::new(Method::GET, format!("{SECRETS}/shop-tls"), move |_| {
        (StatusCode::OK, user_secret(without))
    })
}

#[tokio::test]
async fn the_users_certificate_is_read_nothing_is_issued_and_the_credentials_carry_its_ca() {
    let (pg, cache) = converged_with_own_certificate();
    // The credentials held Tusk's CA: they now carry the user's, their passwords kept.
    let mut script = vec![get_user_secret(None)];
    script.extend(credentials_follow(&cache));
    script.push(Expect::event(NS));
    let (result, seen) = scenario_result(pg, cache.clone(), script).await;
    result.expect("reconciled");
    for applied in [&seen[2].body, &seen[4].body] {
        assert_eq!(applied["data"]["ca.crt"], "dXNlciBDQQ==");
        let annotations = &applied["metadata"]["annotations"];
        assert_eq!(
            annotations[tls::CA_FINGERPRINT_ANNOTATION],
            tls::ca_fingerprint("user CA")
        );
    }
    assert_eq!(seen[2].body["data"]["password"], "c3UtcGFzc3dvcmQ=");

    // Converged again (credentials on the user's CA): one read of the user's Secret, no write.
    let (pg, mut cache) = converged_with_own_certificate();
    for secret in &mut cache.secrets {
        if matches!(
            secret.metadata.name.as_deref(),
            Some("demo-superuser" | "demo-app")
        ) {
            *secret = tusk::resources::with_ca(secret, secret, "user CA").expect("a login");
        }
    }
    let (result, seen) = scenario_result(pg, cache, vec![get_user_secret(None)]).await;
    result.expect("reconciled");
    assert_eq!(seen.len(), 1);
}

#[tokio::test]
async fn a_missing_or_incomplete_server_secret_is_named_in_ready() {
    let missing = Expect::get_missing(format!("{SECRETS}/shop-tls"));
    for (read, message) in [
        (
            missing,
            "Secret shop-tls, named by spec.tls.serverSecret, does not exist",
        ),
        (
            get_user_secret(Some("tls.key")),
            "Secret shop-tls has no tls.key",
        ),
    ] {
        let (pg, cache) = converged_with_own_certificate();
        let script = vec![read, Expect::event(NS), Expect::apply_status(STATUS)];
        let (result, seen) = scenario_result(pg, cache, script).await;
        let error = result.expect_err("refused");
        assert_eq!(error.to_string(), message);
        assert_eq!(event_reason(&seen[1]), "CertificateFailed");
        let ready = condition(&seen[2].body, "Ready");
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["message"], message);
    }
}

/// Issue 47, defect 3: a spec may not borrow a Secret Tusk generated, another cluster's or its
/// own. Refused from the cache (it holds every Secret Tusk made), before anything is read or
/// mounted: no request but the Event and the status.
#[tokio::test]
async fn a_spec_naming_a_secret_tusk_generated_is_refused_before_anything_is_read() {
    let other_server = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "other-server-tls", "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "tusk", "tusk.dev/cluster": "other"},
            "ownerReferences": [{"apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
                "name": "other", "uid": "other-uid", "controller": true}]}});
    let borrowing_s3 = "storage: {size: 1Gi}\nbackup:\n  schedule: '@daily'\n  destination:\n    \
        s3:\n      bucket: b\n      credentials:\n        accessKeyId: {name: demo-superuser, \
        key: username}\n        secretAccessKey: {name: demo-superuser, key: password}\n";
    for (spec, message) in [
        (
            "storage: {size: 1Gi}\ntls: {serverSecret: other-server-tls}",
            "spec.tls.serverSecret names Secret other-server-tls, which Tusk generated for \
             cluster other",
        ),
        (
            borrowing_s3,
            "spec.backup.destination.s3.credentials.accessKeyId names Secret demo-superuser, \
             which Tusk generated for cluster demo",
        ),
    ] {
        let (pg, mut cache) = converged(spec, true, BackupSchedule::NotConfigured);
        cache
            .secrets
            .push(serde_json::from_value(other_server.clone()).expect("secret"));
        let script = vec![Expect::event(NS), Expect::apply_status(STATUS)];
        let (result, seen) = scenario_result(pg, cache, script).await;
        let error = result.expect_err("refused").to_string();
        assert!(error.starts_with(message), "{error}");
        assert_eq!(event_reason(&seen[0]), "SecretNotAllowed");
        let ready = condition(&seen[1].body, "Ready");
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["reason"], "SecretNotAllowed");
    }
}
