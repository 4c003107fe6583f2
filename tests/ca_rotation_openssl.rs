//! The certificates of a CA rotation as OpenSSL (what libpq and PostgreSQL verify with) sees
//! them: across every step, the leaves signed before are trusted by the bundle after and the
//! leaves signed after by the bundle before, for serving and for the replication role's client
//! use; at the end the old CA's leaves are refused. Two CAs trusted side by side must not
//! confuse OpenSSL's issuer lookup (with leaves lacking an authority key identifier and CAs of
//! one name it picked the wrong one: "EVP lib"; ours have both a key identifier and a name of
//! their own).

use std::path::Path;
use std::process::Command;

use time::OffsetDateTime;
use tusk::PostgreSQL;
use tusk::resources::ca_rotation::{CaState, Lifetimes};
use tusk::resources::{Cluster, tls};

/// The server's and the replication role's certificates `state`'s signer issues now.
fn leaves(cluster: &Cluster, state: &CaState, lifetimes: &Lifetimes) -> [String; 2] {
    let now = OffsetDateTime::now_utc();
    let validity = tls::Validity::leaf(now, lifetimes, state.signer_not_after(cluster).unwrap());
    let server = tls::issue_server(cluster, "cluster.local", &state.signer, validity).unwrap();
    let replication = tls::issue_replication(cluster, &state.signer, validity).unwrap();
    [server.cert, replication.cert]
}

/// `openssl verify` of `leaf` against `bundle` for `purpose`: Ok, or OpenSSL's complaint.
fn verify(dir: &Path, bundle: &str, leaf: &str, purpose: &str) -> Result<(), String> {
    let (ca, cert) = (dir.join("bundle.pem"), dir.join("leaf.pem"));
    std::fs::write(&ca, bundle).unwrap();
    std::fs::write(&cert, leaf).unwrap();
    let out = Command::new("openssl")
        .args(["verify", "-purpose", purpose, "-CAfile"])
        .arg(&ca)
        .arg(&cert)
        .output()
        .expect("openssl (apt-get install openssl)");
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr)),
    }
}

#[test]
fn openssl_trusts_every_leaf_across_every_step_and_refuses_the_old_ca_at_the_end() {
    let pg: PostgreSQL = serde_json::from_value(serde_json::json!({
        "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
        "metadata": {"name": "demo", "namespace": "prod", "uid": "1234-uid"},
        "spec": {"storage": {"size": "1Gi"}},
    }))
    .unwrap();
    let cluster = Cluster::new(&pg).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lifetimes =
        Lifetimes::new(time::Duration::minutes(3), time::Duration::minutes(20)).unwrap();
    let mut states = vec![CaState::issue(&cluster, OffsetDateTime::now_utc(), &lifetimes).unwrap()];
    for _ in 0..3 {
        let mut due = states.last().unwrap().clone();
        // Due now (the certificates must be valid for OpenSSL now, not in a simulated future);
        // each new CA a second apart, so that its name (its issue time) is its own.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        due.next_step = OffsetDateTime::now_utc();
        let (next, _) = due
            .advance(&cluster, due.next_step, &lifetimes)
            .unwrap()
            .unwrap();
        states.push(next);
    }
    for pair in states.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        for (from, to) in [(before, after), (after, before)] {
            let [server, replication] = leaves(&cluster, from, &lifetimes);
            verify(dir.path(), &to.bundle(), &server, "sslserver").unwrap_or_else(|e| {
                panic!("{:?} → {:?}: server: {e}", before.stage(), after.stage())
            });
            verify(dir.path(), &to.bundle(), &replication, "sslclient").unwrap_or_else(|e| {
                panic!(
                    "{:?} → {:?}: replication: {e}",
                    before.stage(),
                    after.stage()
                )
            });
        }
    }
    let [old_server, _] = leaves(&cluster, &states[0], &lifetimes);
    let refused = verify(dir.path(), &states[3].bundle(), &old_server, "sslserver");
    assert!(refused.is_err(), "the retired CA is still trusted");
}
