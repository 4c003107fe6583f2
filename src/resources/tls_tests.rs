use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;

use super::*;
use crate::resources::ca_rotation::CaState;
use crate::resources::fixtures::*;

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

const LIFETIMES: Lifetimes = Lifetimes {
    ca: CA_LIFETIME,
    leaf: SERVER_LIFETIME,
};

/// A leaf issued at [`now`] by a CA issued then too.
fn validity() -> Validity {
    Validity::leaf(now(), &LIFETIMES, now() + CA_LIFETIME)
}

/// The server's and the replication role's certificates, as a reconcile issues them.
fn issued(cluster: &Cluster, ca: &Pem) -> ServerCertificates {
    ServerCertificates {
        server: issue_server(cluster, "cluster.local", ca, validity()).unwrap(),
        replication: issue_replication(cluster, ca, validity()).unwrap(),
        upgrade: crate::resources::upgrade_tls::issue_upgrade(cluster, ca, validity()).unwrap(),
    }
}

fn der(pem: &str) -> Vec<u8> {
    parse_x509_pem(pem.as_bytes()).unwrap().1.contents
}

#[test]
fn the_server_certificate_names_every_service_and_pod_in_every_form() {
    let pg = postgresql(MINIMAL);
    let names = server_names(&Cluster::new(&pg).unwrap(), "cluster.local");
    for name in [
        "demo-rw",
        "demo-rw.prod",
        "demo-rw.prod.svc",
        "demo-rw.prod.svc.cluster.local",
        "demo-ro.prod.svc",
        "demo-r.prod.svc.cluster.local",
        "demo-0.demo-hl",
        "demo-0.demo-hl.prod.svc",
        "demo-8.demo-hl.prod.svc.cluster.local",
        "localhost",
    ] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} missing from {names:?}"
        );
    }
    assert_eq!(names.len(), (3 + 9) * 4 + 1);
}

#[test]
fn the_server_certificate_is_signed_by_the_cluster_ca_for_serving_only() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let ca = issue_ca(&cluster, now(), &LIFETIMES).unwrap();
    let server = issue_server(&cluster, "example.org", &ca, validity()).unwrap();

    let ca_der = der(&ca.cert);
    let (_, ca_x509) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
    let constraints = ca_x509.basic_constraints().unwrap().unwrap().value;
    assert!(constraints.ca, "the CA is a CA");
    assert_eq!(
        constraints.path_len_constraint,
        Some(0),
        "and signs only leaves"
    );
    assert!(ca_x509.key_usage().unwrap().unwrap().value.key_cert_sign());

    let server_der = der(&server.cert);
    let (_, leaf) = x509_parser::parse_x509_certificate(&server_der).unwrap();
    leaf.verify_signature(Some(ca_x509.public_key()))
        .expect("the server certificate verifies against the CA");
    assert_eq!(leaf.issuer(), ca_x509.subject());
    assert!(
        !leaf
            .basic_constraints()
            .unwrap()
            .is_some_and(|c| c.value.ca)
    );
    let eku = leaf.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && !eku.client_auth);
    let sans: Vec<String> = leaf
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some((*d).to_owned()),
            _ => None,
        })
        .collect();
    assert!(sans.contains(&"demo-rw.prod.svc.example.org".to_owned()));
    assert_eq!(sans, server_names(&cluster, "example.org"));

    // Valid from just before now; the server's life ends well before the CA's.
    let validity = leaf.validity();
    let start = validity.not_before.timestamp();
    assert!(
        start <= now().unix_timestamp() && start >= (now() - Duration::hours(1)).unix_timestamp()
    );
    assert_eq!(
        validity.not_after.timestamp(),
        (now() + SERVER_LIFETIME).unix_timestamp()
    );
    assert!(validity.not_after < ca_x509.validity().not_after);
}

#[test]
fn the_replication_certificate_names_the_role_for_client_use_only_and_expires_with_the_server() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let ca = issue_ca(&cluster, now(), &LIFETIMES).unwrap();
    let client = issue_replication(&cluster, &ca, validity()).unwrap();
    let ca_der = der(&ca.cert);
    let (_, ca_x509) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
    let client_der = der(&client.cert);
    let (_, leaf) = x509_parser::parse_x509_certificate(&client_der).unwrap();
    leaf.verify_signature(Some(ca_x509.public_key()))
        .expect("signed by the cluster's CA");
    let common_name = leaf.subject().iter_common_name().next().unwrap();
    assert_eq!(
        common_name.as_str().unwrap(),
        "tusk_replication",
        "clientcert=verify-full matches it against the user"
    );
    let eku = leaf.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
    assert_eq!(
        leaf.validity().not_after.timestamp(),
        validity().until.unix_timestamp()
    );
}

#[test]
fn a_stored_ca_signs_again_and_a_damaged_one_is_named() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let ca = issue_ca(&cluster, now(), &LIFETIMES).unwrap();
    let state = CaState {
        signer: ca.clone(),
        next: None,
        previous: None,
        next_step: now(),
    };
    let secret = state.secret(&cluster);
    assert_eq!(secret.metadata.name.as_deref(), Some("demo-ca"));
    let stored = CaState::read(&secret, &LIFETIMES).unwrap();
    assert_eq!(stored, state);
    issue_server(&cluster, "cluster.local", &stored.signer, validity()).unwrap();

    let issued = issued(&cluster, &ca);
    let mounted = server_secret(&cluster, &issued, &ca.cert, validity().until);
    assert_eq!(mounted.metadata.name.as_deref(), Some("demo-server-tls"));
    assert_eq!(mounted.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys: Vec<&String> = mounted.data.as_ref().unwrap().keys().collect();
    assert_eq!(
        keys,
        [CA_CRT, REPLICATION_CRT, REPLICATION_KEY, TLS_CRT, TLS_KEY],
        "no CA key in what pods mount"
    );

    let mut damaged = secret.clone();
    damaged.data.as_mut().unwrap().remove(CA_KEY);
    let error = CaState::read(&damaged, &LIFETIMES).unwrap_err().to_string();
    assert_eq!(error, "Secret demo-ca has no ca.key");
    let garbled = Pem {
        cert: ca.cert.clone(),
        key: "not a key".into(),
    };
    let error = issue_server(&cluster, "cluster.local", &garbled, validity())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("Secret demo-ca has no usable ca.key"),
        "{error}"
    );
}

#[test]
fn a_server_certificate_is_renewed_once_a_third_of_its_life_is_left_or_its_expiry_is_unknown() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let ca = issue_ca(&cluster, now(), &LIFETIMES).unwrap();
    let certificates = issued(&cluster, &ca);
    let issued = now();
    let secret = server_secret(&cluster, &certificates, &ca.cert, validity().until);
    assert_eq!(
        recorded_not_after(&secret),
        Some(validity().until.replace_nanosecond(0).unwrap())
    );
    // Two thirds of the life: not yet; past it: due.
    let two_thirds = SERVER_LIFETIME * 2 / 3;
    assert!(!server_renewal_due(&secret, issued, &LIFETIMES));
    assert!(!server_renewal_due(
        &secret,
        issued + two_thirds - Duration::hours(1),
        &LIFETIMES
    ));
    assert!(server_renewal_due(
        &secret,
        issued + two_thirds + Duration::hours(1),
        &LIFETIMES
    ));
    assert!(server_renewal_due(
        &secret,
        issued + SERVER_LIFETIME * 2,
        &LIFETIMES
    ));
    // No expiry recorded (a Secret written before the annotation, or edited by hand): due.
    let mut unknown = secret.clone();
    unknown.metadata.annotations = None;
    assert!(server_renewal_due(&unknown, issued, &LIFETIMES));
    // Issued before the replication certificate existed: due, so that it gains one.
    let mut without = secret.clone();
    without.data.as_mut().unwrap().remove(REPLICATION_CRT);
    assert!(server_renewal_due(&without, issued, &LIFETIMES));
    let mut garbled = secret;
    garbled
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(NOT_AFTER_ANNOTATION.to_owned(), "soon".to_owned());
    assert!(server_renewal_due(&garbled, issued, &LIFETIMES));
}

#[test]
fn a_server_secret_the_user_brings_is_mounted_instead() {
    let pg = postgresql("storage: {size: 1Gi}\ntls: {serverSecret: shop-tls}");
    let cluster = Cluster::new(&pg).unwrap();
    assert_eq!(cluster.user_server_secret(), Some("shop-tls"));
    assert_eq!(cluster.server_tls_secret_name(), "shop-tls");
    let agent = crate::resources::AgentSettings {
        image: "agent:test".into(),
    };
    let sts = crate::resources::statefulset(&cluster, "checksum", &agent);
    let volumes = sts.spec.template.spec.unwrap().volumes.unwrap();
    let tls = volumes.iter().find(|v| v.name == "tls").unwrap();
    assert_eq!(
        tls.secret.as_ref().unwrap().secret_name.as_deref(),
        Some("shop-tls")
    );
    let plain = postgresql(MINIMAL);
    let plain = Cluster::new(&plain).unwrap();
    assert_eq!(plain.server_tls_secret_name(), "demo-server-tls");
}

#[test]
fn the_poolers_certificate_serves_its_service_logs_in_as_tusk_pooler_and_is_not_due_when_issued() {
    use crate::resources::pooler_tls::{issue_pooler, pooler_tls_secret};
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let ca = issue_ca(&cluster, now(), &LIFETIMES).unwrap();
    let pooler = issue_pooler(&cluster, "cluster.local", &ca, validity()).unwrap();
    let der = der(&pooler.cert);
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let subject = cert.subject().to_string();
    assert!(subject.contains("CN=tusk_pooler"), "{subject}");
    let names: Vec<String> = cert
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(name) => Some(name.to_string()),
            _ => None,
        })
        .collect();
    assert!(
        names.contains(&"demo-pooler-rw.prod.svc".to_owned()),
        "{names:?}"
    );
    let usage = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(usage.server_auth && usage.client_auth);
    // It carries no replication certificate, and must still not be found due at once (a
    // reconcile would issue it again on every pass).
    let secret = pooler_tls_secret(&cluster, &pooler, &ca.cert, validity().until);
    assert!(!leaf_renewal_due(&secret, now(), &LIFETIMES));
    assert!(server_renewal_due(&secret, now(), &LIFETIMES));
}
