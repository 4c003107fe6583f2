//! A restore is one transaction per database, not one for the whole cluster: when a later
//! database fails, the agent drops what it created and says exactly what the target holds, and
//! a new attempt, even after a killed one, starts over and succeeds.

mod common;

use common::agent::{db_agent, run_fails, run_ok};
use common::postgres::PgServer;
use common::seed;
use common::stores::{Kind, TestStore};

const DATABASES: &str = "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database WHERE datname IN ('app', 'reports')";
const MARKS: &str = "SELECT count(*) FROM pg_database d \
     WHERE shobj_description(d.oid, 'pg_database') LIKE 'tusk: restore in progress%'";

/// Every database created from template0 (as the agent creates them, like `pg_restore
/// --create`) refuses `CREATE TABLE` while it is named `reports`.
fn break_reports(pg: &PgServer) {
    in_template0(
        pg,
        "CREATE FUNCTION refuse() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN \
         IF current_database() = 'reports' THEN RAISE EXCEPTION 'reports is refused'; END IF; END $$; \
         CREATE EVENT TRIGGER refuse ON ddl_command_start WHEN TAG IN ('CREATE TABLE') \
         EXECUTE FUNCTION refuse()",
    );
}

fn repair(pg: &PgServer) {
    in_template0(pg, "DROP EVENT TRIGGER refuse; DROP FUNCTION refuse()");
}

/// template0 accepts connections only for the time of `sql`.
fn in_template0(pg: &PgServer, sql: &str) {
    pg.psql(
        "postgres",
        "ALTER DATABASE template0 ALLOW_CONNECTIONS true",
    );
    pg.psql("template0", sql);
    pg.psql(
        "postgres",
        "ALTER DATABASE template0 ALLOW_CONNECTIONS false",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_database_is_undone_and_said_and_a_retry_succeeds() {
    let store = TestStore::start(Kind::Minio).await;
    let source = PgServer::start();
    seed::seed(&source);
    let expected = seed::checksums(&source);
    let backup = db_agent(&store, &source, "backup --backup-id b1");
    run_ok(backup);

    let target = PgServer::start();
    break_reports(&target);
    let restore = db_agent(&store, &target, "restore --backup-id b1");
    let error = run_fails(restore, 1, "reports is refused");
    // The databases before `reports` in the manifest were restored; those this attempt created
    // are dropped again, `postgres` (which existed) keeps its data and its mark.
    assert!(
        error.contains(r#"while restoring database "reports""#)
            && error.contains(
                r#"databases restored before the failure: ["app", "odd name's db", "postgres"]"#
            )
            && error.contains(
                r#"dropped again (this attempt created them): ["app", "odd name's db", "reports"]"#
            )
            && error.contains(
                r#"still holding restored data (a new attempt cleans them): ["postgres"]"#
            ),
        "{error}"
    );
    assert_eq!(target.psql("postgres", DATABASES), "");

    // A killed attempt leaves marks instead: a half-restored `app` it created, and `reports`
    // that existed before it and holds part of the data.
    repair(&target);
    target.psql("postgres", "CREATE DATABASE app");
    target.psql("app", "CREATE TABLE half (i int)");
    target.psql(
        "postgres",
        "COMMENT ON DATABASE app IS 'tusk: restore in progress (created) of backup b1'",
    );
    target.psql("postgres", "CREATE DATABASE reports");
    target.psql(
        "postgres",
        "COMMENT ON DATABASE reports IS 'tusk: restore in progress (existed) of backup b1'",
    );
    let first = db_agent(&store, &target, "restore --backup-id b1");
    run_ok(first);
    let partial = db_agent(&store, &target, "restore --backup-id b1");
    // Without marks, a database holding objects is the user's: refused.
    run_fails(partial, 6, "not empty");

    assert_eq!(seed::checksums(&target), expected);
    assert_eq!(
        target.psql(
            "app",
            "SELECT count(*) FROM pg_tables WHERE tablename = 'half'"
        ),
        "0"
    );
    assert_eq!(target.psql("postgres", MARKS), "0");
}
