//! Mock-API scenarios for changes made behind the operator's back: children deleted or edited
//! out of band are recreated or reverted, and an existing Secret is never overwritten.

mod support;

use http::{Method, StatusCode};
use serde_json::json;
use support::paths::{SECRETS, SERVICES, STATEFULSETS};
use support::read::{applied, event_reason};
use support::run::scenario;
use support::verifier::{self, Expect};
use support::world::*;
use tusk::PostgreSQL;
use tusk::clusters::status::BackupSchedule;
use tusk::resources::ca_rotation::Lifetimes;
use tusk::resources::tls;
use tusk::resources::verifiers::password_digest;

/// A converged, Ready cluster whose cache then lost what `forget` removes.
fn converged_without(
    spec_yaml: &str,
    backup: BackupSchedule,
    forget: impl FnOnce(&mut Cache),
) -> (PostgreSQL, Cache) {
    let (pg, mut cache) = converged(spec_yaml, true, backup);
    forget(&mut cache);
    (with_certificate_times(pg, &cache), cache)
}

#[tokio::test]
async fn a_child_deleted_out_of_band_is_recreated() {
    let (pg, cache) = converged_without(WITH_BACKUP, BackupSchedule::Scheduled, |cache| {
        remove_named(&mut cache.services, "demo-rw");
    });
    let script = vec![
        Expect::apply(format!("{SERVICES}/demo-rw")),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    // No selector: the operator's EndpointSlice routes it (kube-controller-manager must not).
    assert_eq!(seen[0].body["spec"]["selector"], serde_json::Value::Null);
    assert_eq!(
        seen[0].body["metadata"]["annotations"]["tusk.dev/endpoints"],
        "operator"
    );
    assert_eq!(seen[1].body["note"], "Created Service demo-rw");
}

#[tokio::test]
async fn drift_is_reverted() {
    let (pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    let template = cache.statefulsets[0]
        .spec
        .template
        .spec
        .as_mut()
        .expect("pod spec");
    template.containers[0].image = Some("postgres:9.6".to_owned());
    let script = vec![
        Expect::apply_with(format!("{STATEFULSETS}/demo"), |sts| {
            sts["status"] = json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1});
        }),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    let image = &seen[0].body["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(image, "docker.io/library/postgres:18");
}

#[tokio::test]
async fn an_existing_secret_is_never_overwritten() {
    let (pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    // Not yet in the cache, but present on the server: read, then left alone.
    remove_named(&mut cache.secrets, "demo-app");
    let theirs = || {
        Expect::new(Method::GET, format!("{SECRETS}/demo-app"), |_| {
            let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "demo-app", "namespace": NS}, "data": {"password": "b2xk"}});
            (StatusCode::OK, secret)
        })
    };
    let script = vec![
        theirs(),
        // Its password ("old") is the declared one all the same: a verifier is made of it.
        get_cached_secret(&cache, "demo-superuser"),
        theirs(),
        get_cached_secret(&cache, "demo-verifiers"),
        Expect::apply(format!("{SECRETS}/demo-verifiers")),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    let writes: Vec<_> = verifier::writes(&seen)
        .into_iter()
        .filter(|write| !write.path.contains("/events"))
        .collect();
    assert_eq!(writes.len(), 1, "the verifiers only, never the Secret");
    assert_eq!(
        writes[0].body["metadata"]["annotations"]["tusk.dev/app-password-sha256"],
        password_digest(b"old")
    );
}

#[tokio::test]
async fn a_deleted_secret_is_recreated_with_a_warning() {
    let (pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    let server = get_cached_secret(&cache, "demo-server-tls");
    let superuser = get_cached_secret(&cache, "demo-superuser");
    let verifiers = get_cached_secret(&cache, "demo-verifiers");
    remove_named(&mut cache.secrets, "demo-app");
    let (_, seen) = scenario(
        pg,
        cache,
        vec![
            Expect::get_missing(format!("{SECRETS}/demo-app")),
            // Its CA comes from the server Secret, which the cache holds without data.
            server,
            Expect::create(SECRETS),
            // Its new password is declared: the other credentials' read (the new one's is
            // known), the verifiers read (the cache may lag), then written.
            superuser,
            verifiers,
            Expect::apply(format!("{SECRETS}/demo-verifiers")),
            Expect::event(NS),
            Expect::event(NS),
            Expect::event(NS),
        ],
    )
    .await;
    // The new password's verifier replaces the old one's; the superuser's is made again.
    let declared = &seen[5].body["metadata"]["annotations"];
    let password = seen[2].body["data"]["password"].as_str().expect("password");
    let password = String::from_utf8(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, password)
            .expect("base64"),
    )
    .expect("UTF-8");
    assert_eq!(
        declared["tusk.dev/app-password-sha256"],
        password_digest(password.as_bytes())
    );
    assert_eq!(
        declared["tusk.dev/superuser-password-sha256"],
        password_digest(b"su-password")
    );
    let seen = [&seen[..3], &seen[6..]].concat();
    assert_eq!(
        seen[2].body["data"]["ca.crt"], "Y2EgY2VydGlmaWNhdGU=",
        "the CA, \"ca certificate\""
    );
    assert_eq!(seen[3].body["note"], "Created Secret demo-app");
    assert_eq!(seen[4].body["note"], "Updated Secret demo-verifiers");
    assert_eq!(seen[5].body["type"], "Warning");
    assert_eq!(event_reason(&seen[5]), "SecretRecreated");
    let note = seen[5].body["note"].as_str().expect("note");
    assert!(note.contains("becomes the role's"), "{note}");
    let password = seen[2].body["data"]["password"].as_str().expect("password");
    assert!(
        !seen[5].body.to_string().contains(password),
        "no secret in Events"
    );
}

#[tokio::test]
async fn credentials_from_before_tls_gain_the_ca_and_keep_their_password() {
    let (pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    let server = get_cached_secret(&cache, "demo-server-tls");
    // As an operator without TLS stored it: its own, with no CA and a plain URI.
    let cluster = tusk::resources::Cluster::new(&pg).expect("valid");
    let mut old = tusk::resources::app_secret(&cluster, "old-password");
    let data = old.data.as_mut().expect("data");
    data.remove("sslmode");
    data.remove("jdbc-uri");
    remove_named(&mut cache.secrets, "demo-app");
    cache.secrets.push(old.clone());
    // An operator without TLS made no verifiers either.
    remove_named(&mut cache.secrets, "demo-verifiers");
    let superuser = get_cached_secret(&cache, "demo-superuser");
    let mut stored = serde_json::to_value(&old).expect("serialisable");
    // As the API server returns it: an apply body must carry none of this back.
    stored["metadata"]["resourceVersion"] = json!("42");
    stored["metadata"]["managedFields"] = json!([{"manager": "tusk-operator"}]);
    stored["metadata"]["labels"]["added-by"] = json!("someone else");
    let again = stored.clone();
    let script = vec![
        Expect::new(Method::GET, format!("{SECRETS}/demo-app"), move |_| {
            (StatusCode::OK, stored)
        }),
        server,
        Expect::apply(format!("{SECRETS}/demo-app")),
        // Its verifiers, made of the passwords the database has: both read, then created.
        superuser,
        Expect::new(Method::GET, format!("{SECRETS}/demo-app"), move |_| {
            (StatusCode::OK, again)
        }),
        Expect::create(SECRETS),
        Expect::event(NS),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    // No warning: the verifiers are made from passwords, not a password of their own.
    assert!(seen[6..].iter().all(|event| event.body["type"] == "Normal"));
    assert_eq!(
        seen[5].body["metadata"]["annotations"]["tusk.dev/app-password-sha256"],
        password_digest(b"old-password")
    );
    let applied = &seen[2].body;
    let text = |key: &str| {
        let encoded = applied["data"][key].as_str().expect(key);
        String::from_utf8(
            base64::Engine::decode(&base64::prelude::BASE64_STANDARD, encoded).expect("base64"),
        )
        .expect("utf-8")
    };
    assert_eq!(
        text("password"),
        "old-password",
        "the database's password is kept"
    );
    assert_eq!(text("ca.crt"), "ca certificate");
    assert_eq!(
        text("uri"),
        "postgresql://app:old%2Dpassword@demo-rw.prod.svc:5432/app?sslmode=verify-full"
    );
    assert_eq!(
        applied["metadata"]["annotations"][tls::CA_FINGERPRINT_ANNOTATION],
        tls::ca_fingerprint("ca certificate")
    );
    let metadata = &applied["metadata"];
    assert!(metadata.get("resourceVersion").is_none() && metadata.get("managedFields").is_none());
    assert!(
        metadata["labels"].get("added-by").is_none(),
        "no one else's label taken over"
    );
    let notes: Vec<&str> = seen[6..]
        .iter()
        .map(|event| event.body["note"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        notes,
        ["Created Secret demo-verifiers", "Updated Secret demo-app"]
    );
    assert!(
        !seen[6..]
            .iter()
            .any(|e| e.body.to_string().contains("old-password"))
    );
}

#[tokio::test]
async fn a_deleted_ca_is_issued_anew_with_a_server_certificate_it_signs() {
    let (pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    let follow = credentials_follow(&cache);
    remove_named(&mut cache.secrets, "demo-ca");
    let pg = with_certificate_times(pg, &cache);
    let mut script = vec![
        Expect::get_missing(format!("{SECRETS}/demo-ca")),
        Expect::create(SECRETS),
        // The server certificate is replaced: the old one was signed by the lost CA.
        Expect::apply(format!("{SECRETS}/demo-server-tls")),
    ];
    // The credentials follow: clients get the new CA, with their passwords kept.
    script.extend(follow);
    script.extend([Expect::event(NS), Expect::event(NS), Expect::event(NS)]);
    let (_, seen) = scenario(pg, cache, script).await;
    // Base64 of the passwords the converged world stored.
    for (name, password) in [
        ("demo-superuser", "c3UtcGFzc3dvcmQ="),
        ("demo-app", "YXBwLXBhc3N3b3Jk"),
    ] {
        let data = &applied(&seen, name)["data"];
        assert_eq!(data["ca.crt"], seen[1].body["data"]["ca.crt"]);
        assert_eq!(data["password"], password);
    }
    let seen = [&seen[..3], &seen[8..]].concat();
    assert_eq!(seen[1].body["metadata"]["name"], "demo-ca");
    let ca = seen[1].body["data"]["ca.crt"].as_str().expect("ca.crt");
    assert_eq!(seen[2].body["data"]["ca.crt"].as_str(), Some(ca));
    assert!(seen[2].body["data"]["tls.key"].is_string());
    assert!(
        seen[2].body["data"].get("ca.key").is_none(),
        "no CA key in the mounted Secret"
    );
    let notes: Vec<&str> = seen[3..]
        .iter()
        .map(|e| e.body["note"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        notes[..2],
        [
            "Created Secret demo-ca",
            "Updated Secret demo-server-tls, Secret demo-superuser, Secret demo-app, ConfigMap \
             demo-ca.crt"
        ]
    );
    assert_eq!(event_reason(&seen[5]), "CertificateAuthorityRecreated");
    assert_eq!(seen[5].body["type"], "Warning");
    let key = seen[1].body["data"]["ca.key"].as_str().expect("ca.key");
    for event in &seen[3..] {
        assert!(!event.body.to_string().contains(key), "no key in Events");
    }
}

/// Runs a reconcile expected to read the stored CA (`stored`) and rewrite the server Secret
/// alone, with its Event; returns the applied Secret.
async fn server_reissued(
    pg: PostgreSQL,
    cache: Cache,
    stored: serde_json::Value,
) -> serde_json::Value {
    let (_, seen) = scenario(
        pg,
        cache,
        vec![
            Expect::new(Method::GET, format!("{SECRETS}/demo-ca"), move |_| {
                (StatusCode::OK, stored)
            }),
            Expect::apply(format!("{SECRETS}/demo-server-tls")),
            Expect::event(NS),
        ],
    )
    .await;
    seen[1].body.clone()
}

#[tokio::test]
async fn a_server_certificate_with_a_third_of_its_life_left_is_renewed_in_place() {
    let pg = postgresql(MINIMAL);
    let cluster = tusk::resources::Cluster::new(&pg).expect("cluster");
    let now = time::OffsetDateTime::now_utc();
    let ca = tls::issue_ca(&cluster, now, &Lifetimes::default()).expect("CA");
    let stored = serde_json::to_value(steady_ca_secret(&cluster, &ca)).expect("JSON");
    let (pg, cache) = converged_without(MINIMAL, BackupSchedule::NotConfigured, |cache| {
        cache.publish_ca(&cluster, &ca.cert);
        // Issued 17 months ago (less than a third of 24 months left) by the stored CA, which
        // the credentials already carry: the renewal rewrites the server Secret alone.
        let expires = now - time::Duration::days(510) + tls::SERVER_LIFETIME;
        let at = jiff::Timestamp::from_second(expires.unix_timestamp()).unwrap();
        for secret in &mut cache.secrets {
            let annotations = secret.metadata.annotations.get_or_insert_default();
            match secret.metadata.name.as_deref() {
                Some("demo-server-tls") => {
                    annotations.insert(tls::NOT_AFTER_ANNOTATION.to_owned(), at.to_string());
                }
                Some("demo-superuser" | "demo-app") => {}
                _ => continue,
            }
            let fingerprint = tls::ca_fingerprint(&ca.cert);
            annotations.insert(tls::CA_FINGERPRINT_ANNOTATION.to_owned(), fingerprint);
        }
    });
    let renewed = &server_reissued(pg, cache, stored).await;
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(renewed.clone()).expect("a Secret");
    let data = secret.data.expect("data");
    assert_eq!(
        data["ca.crt"].0,
        ca.cert.as_bytes(),
        "signed by the stored CA"
    );
    let not_after = renewed["metadata"]["annotations"][tls::NOT_AFTER_ANNOTATION]
        .as_str()
        .expect("the new expiry recorded");
    let not_after: jiff::Timestamp = not_after.parse().expect("RFC 3339");
    assert!(not_after.as_second() > (now + time::Duration::days(700)).unix_timestamp());
    assert!(
        renewed["data"].get("ca.key").is_none(),
        "no CA key in the mounted Secret"
    );
    assert!(
        !data[tls::REPLICATION_CRT].0.is_empty() && !data[tls::REPLICATION_KEY].0.is_empty(),
        "the replication certificate renewed with it"
    );
}

#[tokio::test]
async fn a_server_secret_from_before_the_replication_certificate_gains_one() {
    let pg = postgresql(MINIMAL);
    let cluster = tusk::resources::Cluster::new(&pg).expect("cluster");
    let ca = tls::issue_ca(
        &cluster,
        time::OffsetDateTime::now_utc(),
        &Lifetimes::default(),
    )
    .expect("CA");
    let stored = serde_json::to_value(steady_ca_secret(&cluster, &ca)).expect("JSON");
    let (pg, cache) = converged_without(MINIMAL, BackupSchedule::NotConfigured, |cache| {
        cache.publish_ca(&cluster, &ca.cert);
        // Current in every other way: signed by the stored CA, which the credentials carry.
        for secret in &mut cache.secrets {
            let name = secret.metadata.name.clone().unwrap_or_default();
            if !["demo-server-tls", "demo-superuser", "demo-app"].contains(&name.as_str()) {
                continue;
            }
            let fingerprint = tls::ca_fingerprint(&ca.cert);
            let annotations = secret.metadata.annotations.get_or_insert_default();
            annotations.insert(tls::CA_FINGERPRINT_ANNOTATION.to_owned(), fingerprint);
            if name == "demo-server-tls"
                && let Some(data) = secret.data.as_mut()
            {
                data.remove(tls::REPLICATION_CRT);
                data.remove(tls::REPLICATION_KEY);
            }
        }
    });
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(server_reissued(pg, cache, stored).await).expect("a Secret");
    let data = secret.data.expect("data");
    let certificate = String::from_utf8(data[tls::REPLICATION_CRT].0.clone()).expect("PEM");
    assert!(certificate.starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(
        data["ca.crt"].0,
        ca.cert.as_bytes(),
        "signed by the stored CA"
    );
}

#[tokio::test]
async fn a_server_certificate_left_signed_by_a_replaced_ca_is_signed_again() {
    // The state a failed write leaves: a new CA stored, the server rewrite refused (as it was
    // while the operator could not patch Secrets), so the server still holds the old CA's.
    let (mut pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    let cluster = tusk::resources::Cluster::new(&pg).expect("cluster");
    let ca = tls::issue_ca(
        &cluster,
        time::OffsetDateTime::now_utc(),
        &Lifetimes::default(),
    )
    .expect("CA");
    let stored = steady_ca_secret(&cluster, &ca);
    remove_named(&mut cache.secrets, "demo-ca");
    cache.secrets.push(stored.clone());
    // The status as it was written with this CA: issued in a later second than the fixture's
    // (a loaded machine), its next step differs, and the status would be written again.
    let server = cache
        .secrets
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("demo-server-tls"));
    let times = tusk::resources::ca_rotation::certificate_times(server, Some(&stored));
    pg.status.get_or_insert_default().certificates = times;
    let follow = credentials_follow(&cache);
    let stored = serde_json::to_value(&stored).expect("JSON");
    let mut script = vec![
        Expect::new(Method::GET, format!("{SECRETS}/demo-ca"), move |_| {
            (StatusCode::OK, stored)
        }),
        Expect::apply(format!("{SECRETS}/demo-server-tls")),
    ];
    script.extend(follow);
    script.push(Expect::event(NS));
    let (_, seen) = scenario(pg, cache, script).await;
    let fingerprint = tls::ca_fingerprint(&ca.cert);
    for name in ["demo-server-tls", "demo-superuser", "demo-app"] {
        let annotations = &applied(&seen, name)["metadata"]["annotations"];
        assert_eq!(
            annotations[tls::CA_FINGERPRINT_ANNOTATION],
            fingerprint.as_str()
        );
    }
}
