use time::Duration;
use x509_parser::pem::parse_x509_pem;

use super::*;
use crate::resources::fixtures::*;
use crate::resources::tls::{Validity, issue_server};

fn t0() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

/// What the e2e flag would give: leaves of 3 minutes, a CA of 20.
fn short() -> Lifetimes {
    Lifetimes::new(Duration::minutes(3), Duration::minutes(20)).unwrap()
}

/// The certificates (PEM) of a bundle, in order.
fn certificates(bundle: &str) -> Vec<String> {
    bundle
        .split_inclusive("-----END CERTIFICATE-----\n")
        .map(str::to_owned)
        .collect()
}

/// Whether the leaf `leaf` (PEM) is signed by one of the CAs in `bundle`.
fn trusted(leaf: &str, bundle: &str) -> bool {
    let leaf_der = parse_x509_pem(leaf.as_bytes()).unwrap().1.contents;
    let (_, leaf) = x509_parser::parse_x509_certificate(&leaf_der).unwrap();
    certificates(bundle).iter().any(|ca| {
        let ca_der = parse_x509_pem(ca.as_bytes()).unwrap().1.contents;
        let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
        leaf.verify_signature(Some(ca.public_key())).is_ok()
    })
}

/// Steps `state` at its due time, and checks that a step was taken.
fn step(cluster: &Cluster, state: &CaState, lifetimes: &Lifetimes) -> (CaState, Stage) {
    let before = state.next_step - Duration::seconds(1);
    assert_eq!(
        state.advance(cluster, before, lifetimes).unwrap(),
        None,
        "early"
    );
    state
        .advance(cluster, state.next_step, lifetimes)
        .unwrap()
        .expect("a step at its time")
}

#[test]
fn a_rotation_publishes_then_promotes_then_retires_each_an_overlap_apart() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let lifetimes = short();
    let steady = CaState::issue(&cluster, t0(), &lifetimes).unwrap();
    assert_eq!(steady.stage(), Stage::Steady);
    assert_eq!(
        steady.next_step,
        t0() + Duration::minutes(20) - Duration::seconds(400)
    );
    assert_eq!(
        certificates(&steady.bundle()),
        vec![steady.signer.cert.clone()]
    );

    let (published, stage) = step(&cluster, &steady, &lifetimes);
    assert_eq!(stage, Stage::Published);
    assert_eq!(published.signer, steady.signer, "the old CA still signs");
    let next = published.next.clone().unwrap();
    assert_eq!(
        certificates(&published.bundle()),
        [steady.signer.cert.clone(), next.cert.clone()]
    );
    assert_eq!(published.next_step, steady.next_step + Duration::minutes(2));

    let subject = |pem: &str| {
        let der = parse_x509_pem(pem.as_bytes()).unwrap().1.contents;
        let (_, ca) = x509_parser::parse_x509_certificate(&der).unwrap();
        ca.subject().to_string()
    };
    assert_ne!(
        subject(&next.cert),
        subject(&steady.signer.cert),
        "trusted side by side, each CA has a name of its own"
    );

    let (promoted, stage) = step(&cluster, &published, &lifetimes);
    assert_eq!(stage, Stage::Promoted);
    assert_eq!(promoted.signer, next, "the published CA signs");
    assert_eq!(
        certificates(&promoted.bundle()),
        [next.cert.clone(), steady.signer.cert.clone()],
        "the old one still trusted"
    );

    let (retired, stage) = step(&cluster, &promoted, &lifetimes);
    assert_eq!(stage, Stage::Steady);
    assert_eq!(certificates(&retired.bundle()), vec![next.cert.clone()]);
    // The new CA was issued at the publication: its own rotation two thirds of its life on.
    assert_eq!(
        retired.next_step,
        steady.next_step + Duration::minutes(20) - Duration::seconds(400)
    );

    // The overlap: across every step, a leaf of the signer before is trusted by the bundle
    // after, and a leaf of the signer after by the bundle before.
    let leaf = |state: &CaState, at| {
        let validity = Validity::leaf(at, &lifetimes, state.signer_not_after(&cluster).unwrap());
        issue_server(&cluster, "cluster.local", &state.signer, validity)
            .unwrap()
            .cert
    };
    for (before, after) in [
        (&steady, &published),
        (&published, &promoted),
        (&promoted, &retired),
    ] {
        assert!(trusted(&leaf(before, before.next_step), &after.bundle()));
        assert!(trusted(&leaf(after, before.next_step), &before.bundle()));
    }
    assert!(
        !trusted(&leaf(&steady, t0()), &retired.bundle()),
        "the old CA is gone at the end"
    );
}

#[test]
fn every_stage_is_kept_in_the_ca_secret_and_read_back() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let lifetimes = short();
    let mut state = CaState::issue(&cluster, t0(), &lifetimes).unwrap();
    for keys in [
        &[CA_CRT, CA_KEY, NEXT_CRT, NEXT_KEY][..],
        &[CA_CRT, CA_KEY, PREVIOUS_CRT],
        &[CA_CRT, CA_KEY],
    ] {
        state = step(&cluster, &state, &lifetimes).0;
        let secret = state.secret(&cluster);
        let mut stored: Vec<&str> = secret
            .data
            .as_ref()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        stored.sort_unstable();
        let mut wanted = keys.to_vec();
        wanted.sort_unstable();
        assert_eq!(stored, wanted, "{:?}", state.stage());
        assert_eq!(CaState::read(&secret, &lifetimes).unwrap(), state);
        assert_eq!(
            tls::recorded_ca(&secret),
            Some(tls::ca_fingerprint(&state.bundle()).as_str()),
            "the server and credentials Secrets follow the bundle"
        );
        assert_eq!(recorded_next_step(&secret), Some(state.next_step));
        assert!(!step_due(&secret, state.next_step - Duration::seconds(1)));
        assert!(step_due(&secret, state.next_step));
    }
}

#[test]
fn a_ca_secret_from_before_rotations_is_scheduled_from_its_certificate() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let lifetimes = Lifetimes::default();
    let state = CaState::issue(&cluster, t0(), &lifetimes).unwrap();
    let mut secret = state.secret(&cluster);
    secret.metadata.annotations = None;
    assert!(step_due(&secret, t0()), "unscheduled: read once");
    let read = CaState::read(&secret, &lifetimes).unwrap();
    assert_eq!(
        read.next_step,
        t0() + tls::CA_LIFETIME - tls::CA_LIFETIME / 3
    );
    assert_eq!(read.stage(), Stage::Steady);
    assert_eq!(
        read.bundle(),
        state.signer.cert,
        "the same ca.crt as before rotations"
    );
}

#[test]
fn an_expired_ca_is_replaced_at_once() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let lifetimes = short();
    let old = CaState::issue(&cluster, t0(), &lifetimes).unwrap();
    let late = t0() + Duration::hours(1);
    let (new, stage) = old.advance(&cluster, late, &lifetimes).unwrap().unwrap();
    assert_eq!(stage, Stage::Replaced);
    assert_eq!(new.stage(), Stage::Steady);
    assert_ne!(new.signer, old.signer);
    assert_eq!(
        new.signer_not_after(&cluster).unwrap(),
        late + Duration::minutes(20)
    );
}

#[test]
fn lifetimes_that_would_let_a_leaf_outlive_its_ca_are_refused() {
    let ok = Lifetimes::default();
    assert_eq!(Lifetimes::new(ok.leaf, ok.ca), Ok(ok));
    assert!(Lifetimes::new(Duration::minutes(5), Duration::minutes(20)).is_err());
    assert!(Lifetimes::new(Duration::seconds(30), Duration::minutes(20)).is_err());
    let leaf = Validity::leaf(t0(), &ok, t0() + Duration::days(30));
    assert_eq!(
        leaf.until,
        t0() + Duration::days(30),
        "never past its signer"
    );
}

#[test]
fn the_status_shows_the_server_expiry_and_the_next_step() {
    let pg = postgresql(MINIMAL);
    let cluster = Cluster::new(&pg).unwrap();
    let lifetimes = short();
    let state = CaState::issue(&cluster, t0(), &lifetimes).unwrap();
    let ca = state.secret(&cluster);
    let validity = Validity::leaf(t0(), &lifetimes, t0() + lifetimes.ca);
    let issued = tls::ServerCertificates {
        server: issue_server(&cluster, "cluster.local", &state.signer, validity).unwrap(),
        replication: tls::issue_replication(&cluster, &state.signer, validity).unwrap(),
        upgrade: None,
    };
    let server = tls::server_secret(&cluster, &issued, &state.bundle(), validity.until);
    let times = certificate_times(Some(&server), Some(&ca)).unwrap();
    let second = |at: OffsetDateTime| jiff::Timestamp::from_second(at.unix_timestamp()).unwrap();
    assert_eq!(
        times.server_not_after.unwrap().0,
        second(t0() + Duration::minutes(3))
    );
    assert_eq!(times.ca_next_step.unwrap().0, second(state.next_step));
    assert_eq!(certificate_times(None, None), None);
}
