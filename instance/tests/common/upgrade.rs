//! Two managed primaries for the online-upgrade tests driven through the managers: the old
//! side with logical WAL, the new side trusting the old side's CA and holding its upgrade
//! certificate, as the cluster's server Secret carries them for the upgrade's time.

use std::time::Duration;

use tusk_contract::upgrade_source::{PUBLISH_PATH, Published};
use tusk_contract::upgrade_target::{CopyProgress, CopyRequest, PROGRESS_PATH};

use super::*;

/// The old primary (`wal_level = logical`) and a new one, both running.
pub fn old_and_new() -> (Cluster, Cluster) {
    let mut old = Cluster::with_settings(&["demo-0"], "wal_level = logical\n");
    old.set_lease("demo-0", true);
    old.member("demo-0").start();
    old.member("demo-0")
        .wait_ready_as("primary", Duration::from_secs(90));
    (old, single_primary())
}

/// [`old_and_new`] with the upgrade certificate handed over and `schema` run in the old
/// primary's `appdb`: the two sides of a copy driven through the managers.
pub fn copy_sides_with(schema: &str) -> (Cluster, Cluster) {
    let (mut old, new) = old_and_new();
    hand_over_the_upgrade_certificate(&old, &new);
    sql(old.member("demo-0"), "appdb", schema);
    (old, new)
}

/// The new side trusts the old side's CA beside its own and holds the old side's upgrade
/// certificate (one cluster's CA and certificate in a real upgrade).
pub fn hand_over_the_upgrade_certificate(old: &Cluster, new: &Cluster) {
    let (old_tls, new_tls) = (old.dir.path().join("tls"), new.dir.path().join("tls"));
    let both = [
        std::fs::read_to_string(new_tls.join("ca.crt")).expect("new CA"),
        std::fs::read_to_string(old_tls.join("ca.crt")).expect("old CA"),
    ]
    .concat();
    std::fs::write(new_tls.join("ca.crt"), both).expect("CA bundle");
    for file in ["upgrade.crt", "upgrade.key"] {
        std::fs::copy(old_tls.join(file), new_tls.join(file)).expect("upgrade certificate");
        chown(&new_tls.join(file));
    }
}

/// One SQL statement (or several, one transaction) as the superuser; its trimmed output.
pub fn sql(member: &Instance, db: &str, sql: &str) -> String {
    member
        .psql_as("postgres", SUPERUSER_PASSWORD, db, sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .trim()
        .to_owned()
}

pub fn post<T: serde::de::DeserializeOwned>(member: &Instance, path: &str, body: &str) -> T {
    let (code, answer) = http_post(member.status_port, path, body);
    assert_eq!(code, 200, "{path}: {answer}");
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{path}: {e}: {answer}"))
}

pub fn progress(member: &Instance) -> CopyProgress {
    let answer = http_get(member.status_port, PROGRESS_PATH).expect("progress answered");
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("progress: {e}: {answer}"))
}

/// The old primary's databases published by its manager, as the copy request the operator sends
/// the new side (and its JSON body).
pub fn publish_for_copy(primary: &Instance) -> (CopyRequest, String) {
    let published: Published = post(primary, PUBLISH_PATH, "");
    let request = CopyRequest {
        host: "127.0.0.1".into(),
        port: primary.port,
        databases: published.databases,
    };
    let body = serde_json::to_string(&request).expect("request");
    (request, body)
}
