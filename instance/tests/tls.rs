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

/// psql to `member` with `sslmode=verify-full` trusting only `ca`.
fn verified_psql(member: &Instance, ca: &std::path::Path) -> Result<String, String> {
    let mut psql = std::process::Command::new(pg_bin_dir().join("psql"));
    psql.args(tusk_testkit::PSQL_SCRIPT)
        .arg("-d")
        .arg(format!(
            "host=localhost hostaddr=127.0.0.1 port={} user=postgres dbname=postgres \
             sslmode=verify-full sslrootcert={}",
            member.port,
            ca.display()
        ))
        .args(["-c", "SELECT 1"])
        .env("PGPASSWORD", SUPERUSER_PASSWORD);
    output_of(psql)
}

#[test]
fn certificates_replaced_under_a_running_server_are_served_without_a_restart() {
    let mut cluster = Cluster::new(&["demo-0"]);
    for member in &mut cluster.members {
        member.set_env("TUSK_TLS_POLL_MS", Some("200"));
    }
    cluster.set_lease("demo-0", true);
    let tls_dir = cluster.dir.path().join("tls");
    let primary = cluster.member("demo-0");
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(90));
    let pid = primary.postmaster_pid();
    assert_eq!(
        verified_psql(primary, &tls_dir.join("ca.crt")),
        Ok("1".into())
    );
    // The manager's own reload after a start (the slot WAL limit) is over: any reload from
    // here on is the one under test.
    wait_for("the slot WAL limit set", Duration::from_secs(30), || {
        primary
            .psql("SHOW max_slot_wal_keep_size")
            .is_ok_and(|v| v != "-1")
    });

    // A new CA and a certificate it signed, swapped in as the kubelet updates a Secret volume.
    let staged = tempfile::tempdir().expect("temp dir");
    let renewed = tusk_testkit::tls::issue(staged.path(), &[]);
    let kept_ca = staged.path().join("old-ca.crt");
    std::fs::copy(tls_dir.join("ca.crt"), &kept_ca).expect("keep the old CA");
    for (from, name) in [
        (&renewed.ca, "ca.crt"),
        (&renewed.cert, "tls.crt"),
        (&renewed.key, "tls.key"),
    ] {
        let tmp = tls_dir.join(format!(".{name}.new"));
        std::fs::copy(from, &tmp).expect("stage");
        if let Some((uid, gid)) = postgres_ids() {
            std::os::unix::fs::chown(&tmp, Some(uid), Some(gid)).expect("chown");
        }
        std::fs::rename(&tmp, tls_dir.join(name)).expect("swap");
    }

    wait_for(
        "the new certificate served",
        Duration::from_secs(30),
        || verified_psql(primary, &renewed.ca).is_ok(),
    );
    assert!(
        verified_psql(primary, &kept_ca).is_err(),
        "the old certificate is still served"
    );
    assert_eq!(primary.postmaster_pid(), pid, "the server was restarted");
}
