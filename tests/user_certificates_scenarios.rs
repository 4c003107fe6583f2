//! Mock-API scenarios for `spec.tls.serverSecret`: a server certificate the user brings. Tusk
//! issues nothing, reads the user's Secret (not its own, so not cached), hands its CA to the
//! credentials, and names the Secret when it is missing, incomplete or cannot serve the
//! cluster.

mod support;

use std::sync::OnceLock;

use http::{Method, StatusCode};
use serde_json::json;
use support::paths::{SECRETS, STATUS};
use support::read::{applied, condition, event_reason};
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

/// A certificate the user made for cluster `demo` (CA, then a server certificate for `domain`'s
/// names), made once per run.
struct Brought {
    ca: String,
    cert: String,
    key: String,
}

fn brought(domain: &'static str) -> &'static Brought {
    static MADE: OnceLock<Vec<(&'static str, Brought)>> = OnceLock::new();
    let made = MADE.get_or_init(|| {
        let pg: PostgreSQL = serde_json::from_value(json!({
            "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
            "metadata": {"name": "demo", "namespace": NS, "uid": "made-outside-tusk"},
            "spec": {"storage": {"size": "1Gi"}},
        }))
        .expect("a cluster");
        let cluster = tusk::resources::Cluster::new(&pg).expect("a cluster");
        let now = time::OffsetDateTime::now_utc();
        let lifetimes = tls::Lifetimes::default();
        let ca = tls::issue_ca(&cluster, now, &lifetimes).expect("a CA");
        let validity = tls::Validity::leaf(now, &lifetimes, now + lifetimes.ca);
        ["svc.cluster.local", "cluster.local"]
            .into_iter()
            .map(|domain| {
                let mut server = tls::issue_server(&cluster, "cluster.local", &ca, validity)
                    .expect("a server certificate");
                if domain == "svc.cluster.local" {
                    // Only the fully qualified names, as a cert-manager Certificate may list.
                    let ca_key = rcgen::KeyPair::from_pem(&ca.key).expect("the CA key");
                    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.cert, ca_key).expect("the CA");
                    let key = rcgen::KeyPair::generate().expect("a key");
                    let fqdn = vec!["demo-rw.prod.svc.cluster.local".to_owned()];
                    let mut params = rcgen::CertificateParams::new(fqdn).expect("names");
                    params.not_before = now - time::Duration::hours(1);
                    params.not_after = now + time::Duration::days(90);
                    let cert = params.signed_by(&key, &issuer).expect("a certificate");
                    server = tls::Pem {
                        cert: cert.pem(),
                        key: key.serialize_pem(),
                    };
                }
                let made = Brought {
                    ca: ca.cert.clone(),
                    cert: server.cert,
                    key: server.key,
                };
                (domain, made)
            })
            .collect()
    });
    &made.iter().find(|(d, _)| *d == domain).expect("made").1
}

fn base64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The user's Secret as cert-manager writes it (`data` base64), minus `without`; with the
/// certificate of `domain` (`cluster.local`: every name Tusk dials).
fn user_secret(without: Option<&str>, domain: &'static str) -> serde_json::Value {
    let made = brought(domain);
    let mut data = json!({"tls.crt": base64(&made.cert), "tls.key": base64(&made.key),
                          "ca.crt": base64(&made.ca)});
    if let Some(key) = without {
        data.as_object_mut().expect("object").remove(key);
    }
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
           "metadata": {"name": "shop-tls", "namespace": NS}, "data": data})
}

fn get_user_secret(without: Option<&'static str>) -> Expect {
    get_user_secret_for(without, "cluster.local")
}

fn get_user_secret_for(without: Option<&'static str>, domain: &'static str) -> Expect {
    Expect::new(Method::GET, format!("{SECRETS}/shop-tls"), move |_| {
        (StatusCode::OK, user_secret(without, domain))
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
    for applied in ["demo-superuser", "demo-app"].map(|name| applied(&seen, name)) {
        let ca = &brought("cluster.local").ca;
        assert_eq!(applied["data"]["ca.crt"], base64(ca));
        let annotations = &applied["metadata"]["annotations"];
        assert_eq!(
            annotations[tls::CA_FINGERPRINT_ANNOTATION],
            tls::ca_fingerprint(ca)
        );
    }
    assert_eq!(
        applied(&seen, "demo-superuser")["data"]["password"],
        "c3UtcGFzc3dvcmQ="
    );
    // Published without a key, as every client's trust.
    assert_eq!(
        applied(&seen, "demo-ca.crt")["data"]["ca.crt"],
        brought("cluster.local").ca
    );

    // Converged again (credentials on the user's CA): one read of the user's Secret, no write.
    let (pg, mut cache) = converged_with_own_certificate();
    for secret in &mut cache.secrets {
        if matches!(
            secret.metadata.name.as_deref(),
            Some("demo-superuser" | "demo-app")
        ) {
            let ca = &brought("cluster.local").ca;
            *secret = tusk::resources::with_ca(secret, secret, ca).expect("a login");
        }
    }
    let cluster = tusk::resources::Cluster::new(&pg).expect("cluster");
    cache.publish_ca(&cluster, &brought("cluster.local").ca);
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

/// Issue 47, defect 5: a brought certificate that does not name what Tusk dials (here only
/// `demo-rw…svc.cluster.local`, as a cert-manager Certificate may list) is refused before any
/// pod mounts it, the missing names listed; it passed before, Ready True, and no standby could
/// verify its primary nor the operator read `/status`.
#[tokio::test]
async fn a_brought_certificate_without_the_names_tusk_dials_is_refused_naming_them() {
    let (pg, cache) = converged_with_own_certificate();
    let read = get_user_secret_for(None, "svc.cluster.local");
    let script = vec![read, Expect::event(NS), Expect::apply_status(STATUS)];
    let (result, seen) = scenario_result(pg, cache, script).await;
    let error = result.expect_err("refused").to_string();
    assert!(
        error.starts_with(
            "Secret shop-tls, named by spec.tls.serverSecret, cannot serve this \
             cluster: the certificate does not name demo-rw.prod.svc, demo-0.demo-hl.prod.svc"
        ),
        "{error}"
    );
    assert_eq!(event_reason(&seen[1]), "ServerCertificateInvalid");
    {
        let message = error;
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

/// Issue 47, low: a `<name>-ca` Secret someone else made before the cluster (no owner) was
/// adopted as the cluster's CA, its maker keeping the key. Refused, named, before anything is
/// issued or written.
#[tokio::test]
async fn a_ca_secret_tusk_did_not_make_is_not_adopted() {
    let (pg, mut cache) = converged("storage: {size: 1Gi}", true, BackupSchedule::NotConfigured);
    remove_named(&mut cache.secrets, "demo-ca");
    remove_named(&mut cache.secrets, "demo-server-tls");
    let planted = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "demo-ca", "namespace": NS},
        "data": {"ca.crt": base64(&brought("cluster.local").ca), "ca.key": base64("key")}});
    let script = vec![
        // Neither is cached: the CA is created without a read, found to exist, then read.
        Expect::already_exists(SECRETS),
        Expect::get_missing(format!("{SECRETS}/demo-server-tls")),
        Expect::new(Method::GET, format!("{SECRETS}/demo-ca"), move |_| {
            (StatusCode::OK, planted.clone())
        }),
        Expect::event(NS),
        Expect::apply_status(STATUS),
    ];
    let (result, seen) = scenario_result(pg, cache, script).await;
    let error = result.expect_err("refused").to_string();
    assert!(
        error.starts_with("Secret demo-ca exists and Tusk did not create it for this cluster"),
        "{error}"
    );
    assert_eq!(event_reason(&seen[3]), "SecretNotAllowed");
    let ready = condition(&seen[4].body, "Ready");
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("SecretNotAllowed"))
    );
}
