//! The agent's connections to PostgreSQL over TLS, as the operator's Jobs make them
//! (`PGSSLMODE=verify-full`, `PGSSLROOTCERT` the cluster's CA): a server is trusted only if its
//! certificate chains to that CA and carries the name dialled, and no password goes to a server
//! that cannot do channel binding. Real PostgreSQL with `ssl = on`.

mod common;

use common::agent::{agent, run_fails, run_ok};
use common::postgres::PgServer;
use common::stores::{Kind, TestStore};

/// The agent listing databases on `pg` over verified TLS, trusting `ca`.
fn verified(store: &TestStore, pg: &PgServer, ca: &std::path::Path) -> std::process::Command {
    let mut cmd = agent(store, "db", Some(pg));
    cmd.env("PGSSLMODE", "verify-full")
        .env("PGSSLROOTCERT", ca)
        .env("TUSK_CONNECT_TIMEOUT", "2s")
        .arg("backup");
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_over_verified_tls_completes() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    let details = run_ok(verified(&store, &pg, &pg.ca));
    assert!(details["backupId"].is_string(), "{details}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_whose_certificate_another_ca_signed_is_refused() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    let other = tempfile::tempdir().expect("temp dir");
    let stranger = tusk_testkit::tls::issue(other.path(), &[]);
    run_fails(
        verified(&store, &pg, &stranger.ca),
        3,
        "invalid peer certificate",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_does_not_carry_the_name_dialled_is_refused() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    let mut cmd = verified(&store, &pg, &pg.ca);
    // The right address under a name the certificate does not carry.
    cmd.env("PGHOST", "db.example.org")
        .env("PGHOSTADDR", "127.0.0.1");
    run_fails(cmd, 3, "invalid peer certificate");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_asking_for_the_password_in_clear_gets_none() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    // A server (or whoever holds a certificate of the CA) that asks for the cleartext password.
    let hba = pg.dir.path().join("data/pg_hba.conf");
    std::fs::write(
        &hba,
        "local all all trust\nhostssl all all 127.0.0.1/32 password\n",
    )
    .expect("write pg_hba.conf");
    pg.psql_local("postgres", "SELECT pg_reload_conf()");
    let error = run_fails(verified(&store, &pg, &pg.ca), 3, "channel binding");
    assert!(!error.contains(common::postgres::PASSWORD));
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_without_a_ca_to_verify_against_is_a_usage_error() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    let mut cmd = agent(&store, "db", Some(&pg));
    cmd.env("PGSSLMODE", "require").arg("backup");
    run_fails(cmd, 2, "PGSSLMODE=require needs PGSSLROOTCERT");
}
