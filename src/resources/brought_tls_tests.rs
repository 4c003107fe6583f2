//! A brought server certificate, checked on certificates made here (rcgen, and openssl for the
//! key forms cert-manager writes by default).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use rcgen::{CertificateParams, DnType, IsCa, Issuer, KeyPair};

use super::*;
use crate::resources::fixtures::{MINIMAL, postgresql};

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

fn ca(key: &KeyPair) -> rcgen::Certificate {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "brought CA");
    params.self_signed(key).unwrap()
}

/// A leaf for `names` signed by `ca_key` (its CA certificate `ca_cert`), with `key`.
fn leaf(names: &[&str], key: &KeyPair, ca_cert: &rcgen::Certificate, ca_key: &KeyPair) -> String {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params.not_before = now() - time::Duration::days(1);
    params.not_after = now() + time::Duration::days(90);
    let issuer = Issuer::from_ca_cert_der(ca_cert.der(), ca_key).unwrap();
    params.signed_by(key, &issuer).unwrap().pem()
}

fn secret(crt: &str, key: &str, ca: &str) -> Secret {
    let data = [(TLS_CRT, crt), (TLS_KEY, key), (CA_CRT, ca)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect::<BTreeMap<_, _>>();
    let mut secret = Secret {
        data: Some(data),
        ..Secret::default()
    };
    secret.metadata.name = Some("shop-tls".into());
    secret
}

/// A two-instance cluster `demo` in `prod`: the names its clients dial.
fn names() -> Vec<String> {
    let pg = postgresql(&format!("{MINIMAL}\ninstances: 2"));
    dialed_names(&Cluster::new(&pg).unwrap())
}

const GOOD: [&str; 4] = [
    "demo-rw.prod.svc",
    "demo-ro.prod.svc",
    "demo-0.demo-hl.prod.svc",
    "demo-1.demo-hl.prod.svc",
];

fn problem(result: Result<(), TlsError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn tusk_dials_the_services_and_each_instance_by_its_headless_name() {
    assert_eq!(names(), GOOD);
    let single = postgresql(MINIMAL);
    assert_eq!(
        dialed_names(&Cluster::new(&single).unwrap()),
        ["demo-rw.prod.svc", "demo-0.demo-hl.prod.svc"]
    );
}

#[test]
fn a_certificate_for_every_dialed_name_from_its_ca_is_accepted() {
    let (ca_key, key) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
    let ca_cert = ca(&ca_key);
    let crt = leaf(&GOOD, &key, &ca_cert, &ca_key);
    check(
        &secret(&crt, &key.serialize_pem(), &ca_cert.pem()),
        &names(),
        now(),
    )
    .unwrap();
    // A wildcard for the pods serves too.
    let wildcard = leaf(
        &["demo-rw.prod.svc", "demo-ro.prod.svc", "*.demo-hl.prod.svc"],
        &key,
        &ca_cert,
        &ca_key,
    );
    let brought = secret(&wildcard, &key.serialize_pem(), &ca_cert.pem());
    check(&brought, &names(), now()).unwrap();
}

#[test]
fn a_certificate_naming_only_the_cluster_local_forms_is_refused_naming_what_is_missing() {
    let (ca_key, key) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
    let ca_cert = ca(&ca_key);
    let local: Vec<String> = GOOD.iter().map(|n| format!("{n}.cluster.local")).collect();
    let local: Vec<&str> = local.iter().map(String::as_str).collect();
    let crt = leaf(&local, &key, &ca_cert, &ca_key);
    let refused = problem(check(
        &secret(&crt, &key.serialize_pem(), &ca_cert.pem()),
        &names(),
        now(),
    ));
    assert!(
        refused.contains("does not name demo-rw.prod.svc, demo-ro.prod.svc, demo-0.demo-hl"),
        "{refused}"
    );
    // A wildcard covers one label only.
    let deep = leaf(&["*.prod.svc"], &key, &ca_cert, &ca_key);
    let refused = problem(check(
        &secret(&deep, &key.serialize_pem(), &ca_cert.pem()),
        &names(),
        now(),
    ));
    assert!(refused.contains("demo-0.demo-hl.prod.svc"), "{refused}");
}

#[test]
fn an_expired_certificate_another_key_or_another_ca_is_refused() {
    let (ca_key, key) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
    let ca_cert = ca(&ca_key);
    let crt = leaf(&GOOD, &key, &ca_cert, &ca_key);
    let later = now() + time::Duration::days(400);
    let refused = problem(check(
        &secret(&crt, &key.serialize_pem(), &ca_cert.pem()),
        &names(),
        later,
    ));
    assert!(refused.contains("expired"), "{refused}");

    let other = KeyPair::generate().unwrap();
    let refused = problem(check(
        &secret(&crt, &other.serialize_pem(), &ca_cert.pem()),
        &names(),
        now(),
    ));
    assert!(refused.contains("tls.key is not the key"), "{refused}");

    let stranger_key = KeyPair::generate().unwrap();
    let stranger = ca(&stranger_key);
    let refused = problem(check(
        &secret(&crt, &key.serialize_pem(), &stranger.pem()),
        &names(),
        now(),
    ));
    assert!(
        refused.contains("does not chain to a CA in ca.crt"),
        "{refused}"
    );
    assert!(refused.starts_with("Secret shop-tls, named by spec.tls.serverSecret"));
}

#[test]
fn an_intermediate_in_tls_crt_chains_the_leaf_to_the_root() {
    let (root_key, mid_key, key) = (
        KeyPair::generate().unwrap(),
        KeyPair::generate().unwrap(),
        KeyPair::generate().unwrap(),
    );
    let root = ca(&root_key);
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "intermediate");
    let issuer = Issuer::from_ca_cert_der(root.der(), &root_key).unwrap();
    let mid = params.signed_by(&mid_key, &issuer).unwrap();
    let crt = leaf(&GOOD, &key, &mid, &mid_key);
    let chain = format!("{crt}{}", mid.pem());
    check(
        &secret(&chain, &key.serialize_pem(), &root.pem()),
        &names(),
        now(),
    )
    .unwrap();
    // Without the intermediate, no chain.
    let alone = secret(&crt, &key.serialize_pem(), &root.pem());
    assert!(problem(check(&alone, &names(), now())).contains("does not chain"));
}

#[test]
fn an_ed25519_signature_is_refused_as_channel_binding_cannot_use_it() {
    let ca_key = KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let key = KeyPair::generate().unwrap();
    let ca_cert = ca(&ca_key);
    let crt = leaf(&GOOD, &key, &ca_cert, &ca_key);
    let refused = problem(check(
        &secret(&crt, &key.serialize_pem(), &ca_cert.pem()),
        &names(),
        now(),
    ));
    assert!(refused.contains("Ed25519"), "{refused}");
}

#[test]
fn missing_keys_are_named() {
    let refused = problem(check(&secret("", "k", "ca"), &names(), now()));
    assert_eq!(refused, "Secret shop-tls has no tls.crt");
    let refused = problem(check(&secret("c", "k", "ca"), &names(), now()));
    assert!(
        refused.contains("tls.crt: no certificate in PEM"),
        "{refused}"
    );
}

/// cert-manager writes PKCS#1 RSA and SEC1 EC keys by default: both are matched too.
#[test]
fn pkcs1_rsa_and_sec1_ec_keys_are_matched_to_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let path = |f: &str| dir.path().join(f).to_str().unwrap().to_owned();
    let san = format!("subjectAltName=DNS:{}", GOOD.join(",DNS:"));
    for (algorithm, traditional) in [("rsa:2048", "rsa"), ("ec:P-256", "ec")] {
        let params = match algorithm {
            "ec:P-256" => {
                tusk_testkit::openssl(&[
                    "ecparam",
                    "-name",
                    "prime256v1",
                    "-out",
                    &path("curve.pem"),
                ]);
                format!("ec:{}", path("curve.pem"))
            }
            rsa => rsa.to_owned(),
        };
        for (name, out) in [("a", "a.crt"), ("b", "b.crt")] {
            tusk_testkit::openssl(&[
                "req",
                "-x509",
                "-newkey",
                &params,
                "-nodes",
                "-days",
                "30",
                "-subj",
                &format!("/CN={name}"),
                "-addext",
                &san,
                "-keyout",
                &path(&format!("{name}.p8")),
                "-out",
                &path(out),
            ]);
            // `openssl ec` writes SEC1 by default; `openssl rsa` needs asking for PKCS#1.
            let (input, output) = (path(&format!("{name}.p8")), path(&format!("{name}.key")));
            let mut args = vec![traditional, "-in", &input, "-out", &output];
            if traditional == "rsa" {
                args.push("-traditional");
            }
            tusk_testkit::openssl(&args);
        }
        let read = |f: &str| std::fs::read_to_string(path(f)).unwrap();
        let (crt, key, other) = (read("a.crt"), read("a.key"), read("b.key"));
        assert!(key.contains(&format!("BEGIN {} PRIVATE KEY", traditional.to_uppercase())));
        check(&secret(&crt, &key, &crt), &names(), now()).unwrap();
        let refused = problem(check(&secret(&crt, &other, &crt), &names(), now()));
        assert!(
            refused.contains("tls.key is not the key"),
            "{algorithm}: {refused}"
        );
    }
}
