//! What the old primary lets the new side do while an online upgrade copies it, and takes back
//! after: role `tusk_upgrade` (certificate only: `pg_hba.conf` admits it with a certificate of
//! the cluster's CA and nothing else) reads the roles with their verifiers, the schema and every
//! row, and subscribes; and in every database a guard refuses schema changes, because a table
//! altered under logical replication breaks the apply on the new side later, at the cut-over.
//!
//! The guard refuses every DDL statement except on temporary objects (an application's
//! scratch tables) and `REFRESH MATERIALIZED VIEW` (a view's rows are not replicated anyway).
//! Databases, roles and tablespaces are the cluster's, not a database's, and fire no event
//! trigger: a database created during the copy has no subscription, so the cut-over waits for
//! its slot and never completes rather than losing it.

use tusk_contract::roles::UPGRADE_USER;
use tusk_contract::upgrade_source::DDL_REFUSED;

use super::{Database, Runner, Server, ident, literal};
use crate::error::Error;

/// The schema of the guard's functions, in every database. pg_dump carries it and the event
/// triggers to the new side: the triggers are dropped in the restore's transaction, the schema
/// stays there as the mark of a schema copied until the new side finishes.
pub const GUARD_SCHEMA: &str = "tusk_upgrade";
const GUARD_DDL: &str = "tusk_upgrade_ddl";
const GUARD_DROP: &str = "tusk_upgrade_drop";

/// The upgrade role with what the copy reads, and the guard in every database.
pub async fn allow(
    runner: &impl Runner,
    server: &Server,
    databases: &[Database],
) -> Result<(), Error> {
    let role = ident(UPGRADE_USER);
    let create = format!(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) THEN \
         CREATE ROLE {role}; END IF; END $$",
        literal(UPGRADE_USER)
    );
    server.query(runner, "postgres", &create).await?;
    for sql in [
        // No password: the certificate is its only credential. Past row security: the copy
        // must see every row.
        format!(
            "ALTER ROLE {role} WITH LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE \
             BYPASSRLS PASSWORD NULL"
        ),
        format!("GRANT pg_read_all_data TO {role}"),
        // pg_dumpall reads the verifiers here, so the roles keep their passwords on the new
        // major without any password being sent.
        format!("GRANT SELECT ON pg_catalog.pg_authid TO {role}"),
    ] {
        server.query(runner, "postgres", &sql).await?;
    }
    for db in databases {
        let connect = format!("GRANT CONNECT ON DATABASE {} TO {role}", ident(&db.name));
        server.query(runner, "postgres", &connect).await?;
        guard(runner, server, &db.name).await?;
    }
    Ok(())
}

/// The guard's functions and event triggers in `db` (kept when they exist).
async fn guard(runner: &impl Runner, server: &Server, db: &str) -> Result<(), Error> {
    let schema = ident(GUARD_SCHEMA);
    let refuse = format!(
        "RAISE EXCEPTION USING MESSAGE = {}, ERRCODE = 'object_not_in_prerequisite_state'",
        literal(DDL_REFUSED)
    );
    // Tusk's own sessions say `tusk.upgrade = on` (`Server::query`): they may still change
    // the guard itself.
    let mine = "IF current_setting('tusk.upgrade', true) = 'on' THEN RETURN; END IF;";
    let sql = format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE OR REPLACE FUNCTION {schema}.refuse_ddl() RETURNS event_trigger
           LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
         BEGIN
           {mine}
           IF EXISTS (SELECT FROM pg_event_trigger_ddl_commands()
                      WHERE command_tag <> 'REFRESH MATERIALIZED VIEW'
                        AND schema_name IS DISTINCT FROM 'pg_temp'
                        AND schema_name NOT LIKE 'pg\\_temp\\_%') THEN
             {refuse};
           END IF;
         END $f$;
         CREATE OR REPLACE FUNCTION {schema}.refuse_drop() RETURNS event_trigger
           LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
         BEGIN
           {mine}
           IF EXISTS (SELECT FROM pg_event_trigger_dropped_objects() WHERE NOT is_temporary) THEN
             {refuse};
           END IF;
         END $f$;
         DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_event_trigger WHERE evtname = {ddl_name}) THEN
             CREATE EVENT TRIGGER {ddl} ON ddl_command_end EXECUTE FUNCTION {schema}.refuse_ddl();
           END IF;
           IF NOT EXISTS (SELECT FROM pg_event_trigger WHERE evtname = {drop_name}) THEN
             CREATE EVENT TRIGGER {drop} ON sql_drop EXECUTE FUNCTION {schema}.refuse_drop();
           END IF;
         END $$;",
        ddl_name = literal(GUARD_DDL),
        drop_name = literal(GUARD_DROP),
        ddl = ident(GUARD_DDL),
        drop = ident(GUARD_DROP),
    );
    server.query(runner, db, &sql).await.map(|_| ())
}

/// The guard's event triggers dropped (its schema stays): how the new side's schema copy ends,
/// in the restore's own transaction.
pub fn drop_triggers() -> String {
    format!(
        "DROP EVENT TRIGGER IF EXISTS {}; DROP EVENT TRIGGER IF EXISTS {};\n",
        ident(GUARD_DDL),
        ident(GUARD_DROP)
    )
}

/// Removes the guard from `db`: on the old side when the copy ends or is cancelled, on the new
/// side when it finishes (there the schema left by the copy marked the schema as copied).
pub async fn unguard(runner: &impl Runner, server: &Server, db: &str) -> Result<(), Error> {
    let sql = format!(
        "{}DROP SCHEMA IF EXISTS {} CASCADE;",
        drop_triggers(),
        ident(GUARD_SCHEMA)
    );
    server.query(runner, db, &sql).await.map(|_| ())
}

/// Takes back what [`allow`] gave: the guard in every database, the role's sessions, grants
/// and the role itself.
pub async fn revoke(
    runner: &impl Runner,
    server: &Server,
    databases: &[Database],
) -> Result<(), Error> {
    for db in databases {
        unguard(runner, server, &db.name).await?;
    }
    let exists = format!(
        "SELECT count(*) FROM pg_roles WHERE rolname = {}",
        literal(UPGRADE_USER)
    );
    if super::source::single(server.query(runner, "postgres", &exists).await?) == "0" {
        return Ok(());
    }
    let role = ident(UPGRADE_USER);
    // Its privileges are recorded per database (pg_authid's grant in the one it was made in).
    for db in databases {
        let owned = format!("DROP OWNED BY {role}");
        server.query(runner, &db.name, &owned).await?;
    }
    let end = format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = {}",
        literal(UPGRADE_USER)
    );
    server.query(runner, "postgres", &end).await?;
    let sql = format!("DROP ROLE IF EXISTS {role}");
    server.query(runner, "postgres", &sql).await.map(|_| ())
}
