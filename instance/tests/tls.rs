//! The manager's connections to its peers over TLS. The harness runs every member with
//! `ssl = on` and a `pg_hba.conf` that refuses connections without TLS first (as a pod's), so
//! every other instance test proves cloning, streaming, rewinding and peer queries verify
//! the server; these pin what verification is for.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn a_primary_asking_for_the_replication_password_in_clear_gets_none() {
    let mut cluster = Cluster::new(&["demo-0", "demo-1"]);
    cluster.set_lease("demo-0", true);
    let primary = cluster.member("demo-0");
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(90));
    // Whoever answers at the holder's address with a certificate of the CA and asks for the
    // password in clear (a compromised member, an address reused): channel binding is
    // required, so the clone gives up before it sends the password.
    let hba = cluster.dir.path().join("pg_hba.conf");
    std::fs::write(
        &hba,
        "local all all peer\nhostssl all all 127.0.0.1/32 password\n\
         hostssl replication tusk_replication 127.0.0.1/32 password\n",
    )
    .expect("rewrite pg_hba.conf");
    let primary = cluster.member("demo-0");
    assert_eq!(primary.psql("SELECT pg_reload_conf()").unwrap(), "t");
    let replica = cluster.member("demo-1");
    replica.start();
    wait_for("the clone refused", Duration::from_secs(60), || {
        std::fs::read_to_string(&replica.log).is_ok_and(|log| {
            log.contains("pg_basebackup failed") && log.contains("channel binding")
        })
    });
    assert!(replica.postmaster_pid().is_none(), "a standby started");
}
