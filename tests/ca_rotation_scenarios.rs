//! Mock-API scenarios for a CA rotation (`resources::ca_rotation`): each step, when due, is one
//! reconcile with exactly these calls: the CA Secret read and written, the server Secret issued
//! again with the new bundle in `ca.crt`, the credentials following it; nothing else, no pod
//! touched (the managers reload PostgreSQL). Not due: nothing is read.

mod support;

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::Secret;
use support::paths::SECRETS;
use support::read::applied;
use support::run::scenario;
use support::verifier::Expect;
use support::world::*;
use time::{Duration, OffsetDateTime};
use tusk::PostgreSQL;
use tusk::clusters::status::BackupSchedule;
use tusk::resources::ca_rotation::{
    self, CA_NEXT_STEP_ANNOTATION, CaState, Lifetimes, NEXT_CRT, PREVIOUS_CRT,
};
use tusk::resources::{Cluster, tls};
use x509_parser::pem::parse_x509_pem;

/// A converged cluster whose CA Secret holds `state`, every other Secret made with its bundle.
fn converged_with(state: &CaState) -> (PostgreSQL, Cache) {
    let (pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    {
        let cluster = Cluster::new(&pg).expect("cluster");
        remove_named(&mut cache.secrets, "demo-ca");
        cache.secrets.push(state.secret(&cluster));
        cache.publish_ca(&cluster, &state.bundle());
        let fingerprint = tls::ca_fingerprint(&state.bundle());
        for secret in &mut cache.secrets {
            let name = secret.metadata.name.clone().unwrap_or_default();
            if ["demo-server-tls", "demo-superuser", "demo-app"].contains(&name.as_str()) {
                let annotations = secret.metadata.annotations.get_or_insert_default();
                annotations.insert(
                    tls::CA_FINGERPRINT_ANNOTATION.to_owned(),
                    fingerprint.clone(),
                );
            }
        }
    }
    (with_certificate_times(pg, &cache), cache)
}

/// A steady CA issued a while ago whose rotation is due now (`ago` before).
fn due_steady(cluster: &Cluster, ago: Duration) -> CaState {
    let lifetimes = Lifetimes::default();
    let mut state = CaState::issue(cluster, OffsetDateTime::now_utc(), &lifetimes).expect("CA");
    state.next_step = OffsetDateTime::now_utc() - ago;
    state
}

/// Runs the reconcile of a due step and returns what it wrote: the CA Secret, the server
/// Secret, and the two credentials Secrets.
async fn step(state: &CaState) -> [Secret; 4] {
    let (pg, cache) = converged_with(state);
    let cluster = Cluster::new(&pg).expect("cluster");
    let stored = serde_json::to_value(state.secret(&cluster)).expect("JSON");
    let mut script = vec![
        Expect::new(Method::GET, format!("{SECRETS}/demo-ca"), move |_| {
            (StatusCode::OK, stored)
        }),
        Expect::apply(format!("{SECRETS}/demo-ca")),
        Expect::apply(format!("{SECRETS}/demo-server-tls")),
    ];
    script.extend(credentials_follow(&cache));
    script.push(Expect::event(NS));
    let (_, seen) = scenario(pg, cache, script).await;
    let secret = |name: &str| {
        serde_json::from_value::<Secret>(applied(&seen, name).clone()).expect("Secret")
    };
    assert_eq!(
        seen[8].body["note"],
        "Updated Secret demo-ca, Secret demo-server-tls, Secret demo-superuser, Secret demo-app, \
         ConfigMap demo-ca.crt"
    );
    let written = ["demo-ca", "demo-server-tls", "demo-superuser", "demo-app"].map(secret);
    // The bundle published without a key is the one every ca.crt holds.
    let bundle = CaState::read(&written[0], &Lifetimes::default())
        .expect("state")
        .bundle();
    assert_eq!(applied(&seen, "demo-ca.crt")["data"]["ca.crt"], bundle);
    written
}

fn text(secret: &Secret, key: &str) -> String {
    let data = secret.data.as_ref().expect("data");
    String::from_utf8(data.get(key).expect(key).0.clone()).expect("UTF-8")
}

/// Whether `leaf` (PEM) is signed by `ca` (PEM).
fn signed_by(leaf: &str, ca: &str) -> bool {
    let leaf_der = parse_x509_pem(leaf.as_bytes()).expect("PEM").1.contents;
    let ca_der = parse_x509_pem(ca.as_bytes()).expect("PEM").1.contents;
    let (_, leaf) = x509_parser::parse_x509_certificate(&leaf_der).expect("leaf");
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).expect("CA");
    leaf.verify_signature(Some(ca.public_key())).is_ok()
}

/// What every `ca.crt` written holds, checked the same in the server and credentials Secrets.
fn bundle_everywhere(written: &[Secret; 4]) -> String {
    let [ca, server, superuser, app] = written;
    let lifetimes = Lifetimes::default();
    let bundle = CaState::read(ca, &lifetimes).expect("state").bundle();
    for secret in [server, superuser, app] {
        assert_eq!(
            text(secret, tls::CA_CRT),
            bundle,
            "{:?}",
            secret.metadata.name
        );
        assert_eq!(
            tls::recorded_ca(secret),
            Some(tls::ca_fingerprint(&bundle).as_str())
        );
    }
    bundle
}

#[tokio::test]
async fn a_due_rotation_publishes_a_new_ca_beside_the_old_one_which_still_signs() {
    let cluster_pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&cluster_pg).expect("cluster");
    let old = due_steady(&cluster, Duration::seconds(5));
    let written = step(&old).await;
    let bundle = bundle_everywhere(&written);
    let next = text(&written[0], NEXT_CRT);
    assert_eq!(bundle, format!("{}{next}", old.signer.cert));
    assert!(signed_by(
        &text(&written[1], tls::TLS_CRT),
        &old.signer.cert
    ));
    assert!(signed_by(
        &text(&written[1], tls::REPLICATION_CRT),
        &old.signer.cert
    ));
    let next_step = ca_rotation::recorded_next_step(&written[0]).expect("scheduled");
    assert!(
        next_step > OffsetDateTime::now_utc() + Duration::days(300),
        "an overlap away"
    );
}

#[tokio::test]
async fn after_the_overlap_the_new_ca_signs_and_the_old_one_is_still_trusted() {
    let cluster_pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&cluster_pg).expect("cluster");
    let (mut published, _) = due_steady(&cluster, Duration::seconds(5))
        .advance(&cluster, OffsetDateTime::now_utc(), &Lifetimes::default())
        .expect("step")
        .expect("published");
    published.next_step = OffsetDateTime::now_utc() - Duration::seconds(1);
    let (old, new) = (
        published.signer.cert.clone(),
        published.next.clone().expect("next"),
    );
    let written = step(&published).await;
    assert_eq!(bundle_everywhere(&written), format!("{}{old}", new.cert));
    assert_eq!(text(&written[0], tls::CA_KEY), new.key, "the new CA signs");
    assert_eq!(text(&written[0], PREVIOUS_CRT), old);
    assert!(signed_by(&text(&written[1], tls::TLS_CRT), &new.cert));
    assert!(signed_by(
        &text(&written[1], tls::REPLICATION_CRT),
        &new.cert
    ));
}

#[tokio::test]
async fn after_the_second_overlap_the_old_ca_is_no_longer_trusted() {
    let cluster_pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&cluster_pg).expect("cluster");
    let lifetimes = Lifetimes::default();
    let now = OffsetDateTime::now_utc();
    let mut state = due_steady(&cluster, Duration::seconds(5));
    for _ in 0..2 {
        state = state
            .advance(&cluster, now, &lifetimes)
            .expect("step")
            .expect("due")
            .0;
        state.next_step = now - Duration::seconds(1);
    }
    let signer = state.signer.cert.clone();
    let written = step(&state).await;
    assert_eq!(bundle_everywhere(&written), signer);
    let data = written[0].data.as_ref().expect("data");
    assert!(!data.contains_key(PREVIOUS_CRT) && !data.contains_key(NEXT_CRT));
    assert!(
        ca_rotation::recorded_next_step(&written[0]).expect("scheduled")
            > now + Duration::days(365)
    );
}

#[tokio::test]
async fn a_rotation_not_yet_due_reads_nothing() {
    let cluster_pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&cluster_pg).expect("cluster");
    let mut state = due_steady(&cluster, Duration::seconds(0));
    state.next_step = OffsetDateTime::now_utc() + Duration::minutes(10);
    let (pg, cache) = converged_with(&state);
    let (_, seen) = scenario(pg, cache, vec![]).await;
    assert!(seen.is_empty(), "{seen:?}");
    assert!(
        state
            .secret(&cluster)
            .metadata
            .annotations
            .expect("annotations")
            .contains_key(CA_NEXT_STEP_ANNOTATION)
    );
}

/// A converged cluster whose cache `edit` changes, its status following the certificates.
fn converged_edited(edit: impl FnOnce(&mut Cache)) -> (PostgreSQL, Cache) {
    let (pg, mut cache) = converged(MINIMAL, true, BackupSchedule::NotConfigured);
    edit(&mut cache);
    (with_certificate_times(pg, &cache), cache)
}

#[tokio::test]
async fn a_ca_secret_from_before_fingerprints_and_rotations_is_annotated_once() {
    // A CA Secret of an early Tusk: a CA with no annotations, which the server and the
    // credentials were made with.
    let pg = postgresql(MINIMAL);
    let cluster = tusk::resources::Cluster::new(&pg).expect("cluster");
    let now = time::OffsetDateTime::now_utc();
    let ca = tls::issue_ca(&cluster, now, &Lifetimes::default()).expect("CA");
    let mut legacy = steady_ca_secret(&cluster, &ca);
    legacy.metadata.annotations = None;
    let (pg, cache) = converged_edited(|cache| {
        remove_named(&mut cache.secrets, "demo-ca");
        cache.secrets.push(legacy.clone());
        cache.publish_ca(&cluster, &ca.cert);
        for secret in &mut cache.secrets {
            let name = secret.metadata.name.clone().unwrap_or_default();
            if ["demo-server-tls", "demo-superuser", "demo-app"].contains(&name.as_str()) {
                let annotations = secret.metadata.annotations.get_or_insert_default();
                let fingerprint = tls::ca_fingerprint(&ca.cert);
                annotations.insert(tls::CA_FINGERPRINT_ANNOTATION.to_owned(), fingerprint);
            }
        }
    });
    let stored = serde_json::to_value(&legacy).expect("JSON");
    let script = vec![
        Expect::new(Method::GET, format!("{SECRETS}/demo-ca"), move |_| {
            (StatusCode::OK, stored)
        }),
        // The server already holds this CA's certificate: only the CA Secret is annotated.
        Expect::apply(format!("{SECRETS}/demo-ca")),
        Expect::event(NS),
    ];
    let (_, seen) = scenario(pg, cache, script).await;
    let annotations = &seen[1].body["metadata"]["annotations"];
    assert_eq!(
        annotations[tls::CA_FINGERPRINT_ANNOTATION],
        tls::ca_fingerprint(&ca.cert)
    );
    // Its rotation scheduled from its certificate: two thirds into its ten years.
    let next_step = annotations[ca_rotation::CA_NEXT_STEP_ANNOTATION]
        .as_str()
        .expect("scheduled");
    let next_step: jiff::Timestamp = next_step.parse().expect("RFC 3339");
    let expected: time::OffsetDateTime = now + tls::CA_LIFETIME - tls::CA_LIFETIME / 3;
    assert!((next_step.as_second() - expected.unix_timestamp()).abs() < 5);
    assert_eq!(seen[2].body["note"], "Updated Secret demo-ca");
    assert!(
        !seen[2].body.to_string().contains("PRIVATE KEY"),
        "no key in Events"
    );
}
