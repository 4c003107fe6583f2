//! Database-level properties survive a backup and a restore into a fresh server: encoding and
//! locale, `ALTER DATABASE … SET`, `ALTER ROLE … IN DATABASE … SET`, grants, revoked PUBLIC
//! rights and the comment. An existing database keeps its encoding (with a warning), and a
//! property that fails to apply is undone like a failed `pg_restore`.

mod common;

use common::agent::{agent, db_agent, run, run_fails, run_ok};
use common::postgres::PgServer;
use common::stores::{Kind, TestStore};

const WHERE: &str = "FROM pg_database WHERE datname = 'props db'";

fn seed(pg: &PgServer) {
    pg.psql("postgres", "CREATE ROLE r LOGIN");
    pg.psql(
        "postgres",
        "CREATE DATABASE \"props db\" TEMPLATE template0 ENCODING 'LATIN1' LOCALE 'C'",
    );
    // The servers' default is UTF8 with libc locale C.
    pg.psql(
        "postgres",
        "CREATE DATABASE \"icu db\" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.utf8' \
         LOCALE_PROVIDER icu ICU_LOCALE 'de-DE'",
    );
    for sql in [
        "ALTER DATABASE \"props db\" SET work_mem = '7MB'",
        "ALTER ROLE r IN DATABASE \"props db\" SET statement_timeout = '5s'",
        "GRANT CONNECT, CREATE ON DATABASE \"props db\" TO r",
        "REVOKE CONNECT ON DATABASE \"props db\" FROM PUBLIC",
        "COMMENT ON DATABASE \"props db\" IS 'the app''s data'",
    ] {
        pg.psql("postgres", sql);
    }
    // é, one byte in LATIN1.
    pg.psql(
        "props db",
        "CREATE TABLE t (s text); INSERT INTO t VALUES ('caf' || chr(233))",
    );
}

/// Encoding, LC_COLLATE, LC_CTYPE, provider and ICU locale of `database`.
fn locale(pg: &PgServer, database: &str) -> String {
    pg.psql(
        "postgres",
        &format!(
            "SELECT concat_ws(' ', pg_encoding_to_char(encoding), datcollate, datctype, \
             datlocprovider, daticulocale) FROM pg_database WHERE datname = '{database}'"
        ),
    )
}

const LATIN1: &str = "LATIN1 C C c";
const ICU: &str = "UTF8 C.utf8 C.utf8 i de-DE";

/// Settings, grants and comment (everything but the encoding and locale), one string each.
fn properties(pg: &PgServer) -> [String; 3] {
    [
        "SELECT string_agg(coalesce(r.rolname, '*') || ': ' || array_to_string(s.setconfig, ','), \
         ' | ' ORDER BY r.rolname NULLS FIRST) FROM pg_db_role_setting s \
         JOIN pg_database d ON d.oid = s.setdatabase LEFT JOIN pg_roles r ON r.oid = s.setrole \
         WHERE d.datname = 'props db'"
            .to_string(),
        // Sorted: GRANT/REVOKE replayed in another order store the same items in another order.
        format!("SELECT string_agg(a::text, ' ' ORDER BY a::text) FROM (SELECT unnest(datacl) a {WHERE}) d"),
        format!("SELECT shobj_description(oid, 'pg_database') {WHERE}"),
    ]
    .map(|q| pg.psql("postgres", &q))
}

fn expected() -> [String; 3] {
    [
        "*: work_mem=7MB | r: statement_timeout=5s",
        "=T/postgres postgres=CTc/postgres r=Cc/postgres",
        "the app's data",
    ]
    .map(String::from)
}

fn restore(store: &TestStore, target: &PgServer, id: &str) -> std::process::Command {
    let mut cmd = agent(store, "db", Some(target));
    cmd.args(["restore", "--backup-id", id]);
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn database_properties_survive_a_round_trip() {
    let store = TestStore::start(Kind::Minio).await;
    let source = PgServer::start();
    seed(&source);
    assert_eq!(locale(&source, "props db"), LATIN1);
    assert_eq!(locale(&source, "icu db"), ICU);
    assert_eq!(properties(&source), expected());
    let backup = db_agent(&store, &source, "backup --backup-id b1");
    run_ok(backup);

    // A fresh server: the agent creates the database, the globals bring role r.
    let target = PgServer::start();
    run_ok(restore(&store, &target, "b1"));
    assert_eq!(locale(&target, "props db"), LATIN1);
    assert_eq!(locale(&target, "icu db"), ICU);
    assert_eq!(properties(&target), expected());
    let data = "SELECT s = 'caf' || chr(233) AND octet_length(s) = 4 FROM t";
    assert_eq!(target.psql("props db", data), "t");

    // An existing (empty) database keeps its UTF8 encoding, said in the log; everything else is
    // restored into it and the data converted.
    let existing = PgServer::start();
    existing.psql("postgres", "CREATE DATABASE \"props db\"");
    let out = run(restore(&store, &existing, "b1"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("restoring into the existing database with encoding UTF8")
            && stderr.contains("the backup's had encoding LATIN1"),
        "{stderr}"
    );
    assert_eq!(locale(&existing, "props db"), "UTF8 C C c");
    assert_eq!(locale(&existing, "icu db"), ICU);
    assert_eq!(properties(&existing), expected());
    let converted = "SELECT s = 'caf' || chr(233) AND octet_length(s) = 5 FROM t";
    assert_eq!(existing.psql("props db", converted), "t");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_setting_the_target_refuses_is_undone_and_a_retry_succeeds() {
    let store = TestStore::start(Kind::Minio).await;
    let source = PgServer::start();
    seed(&source);
    // Accepted as a placeholder where plpgsql is not loaded, refused where it is.
    source.psql(
        "postgres",
        "ALTER DATABASE \"props db\" SET plpgsql.variable_conflict = 'bogus'",
    );
    let backup = db_agent(&store, &source, "backup --backup-id b1");
    run_ok(backup);

    let target = PgServer::start();
    target.psql(
        "postgres",
        "ALTER ROLE postgres SET session_preload_libraries = 'plpgsql'",
    );
    let error = run_fails(
        restore(&store, &target, "b1"),
        1,
        "invalid value for parameter \"plpgsql.variable_conflict\"",
    );
    assert!(
        error.contains("psql (the settings and grants of database \"props db\")")
            && error
                .contains(r#"dropped again (this attempt created them): ["icu db", "props db"]"#),
        "{error}"
    );
    assert_eq!(
        target.psql("postgres", &format!("SELECT count(*) {WHERE}")),
        "0"
    );

    target.psql(
        "postgres",
        "ALTER ROLE postgres RESET session_preload_libraries",
    );
    run_ok(restore(&store, &target, "b1"));
    assert_eq!(locale(&target, "props db"), LATIN1);
    let [settings, acl, comment] = properties(&target);
    assert_eq!(
        settings,
        "*: work_mem=7MB,plpgsql.variable_conflict=bogus | r: statement_timeout=5s"
    );
    assert_eq!(
        [acl, comment],
        [expected()[1].clone(), expected()[2].clone()]
    );
}
