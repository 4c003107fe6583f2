//! What the pooler needs on the primary (`spec.pooler`): role `tusk_pooler`, which logs in by
//! certificate only (`pg_hba.conf`), and in every database a `SECURITY DEFINER` function it
//! may execute, `tusk_pooler.lookup(name)`, PgBouncer's `auth_query`. The function answers
//! with the SCRAM verifier of a role that may log in now, and with nothing for the superuser,
//! replication roles, PostgreSQL's and Tusk's own: the pooler is no way in for them.
//! PgBouncer 1.18 runs the query in the database the client asked for, hence one per database
//! (and template1's, inherited by databases made later from it).

use std::collections::BTreeSet;
use std::sync::Mutex;

use tokio_postgres::Client;
use tusk_contract::roles::{POOLER_SCHEMA, POOLER_USER};

use super::{Change, execute, server_message};
use crate::context::Context;
use crate::sql::{connect, quote_ident};

/// What the role is (ALTER ROLE puts an existing one back).
const POOLER_OPTIONS: &str =
    "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOINHERIT NOBYPASSRLS PASSWORD NULL";

/// The databases (by oid) whose function this process has made: each is made once per
/// process (a new primary makes them again, idempotently), not connected to every pass.
static FURNISHED: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// The statements that make the lookup function in one database; idempotent.
pub fn lookup_statements() -> Vec<String> {
    let (schema, user) = (POOLER_SCHEMA, POOLER_USER);
    vec![
        format!("CREATE SCHEMA IF NOT EXISTS {schema} AUTHORIZATION postgres"),
        format!("REVOKE ALL ON SCHEMA {schema} FROM PUBLIC"),
        format!(
            "CREATE OR REPLACE FUNCTION {schema}.lookup(name text, OUT usename name, \
             OUT passwd text) RETURNS SETOF record LANGUAGE sql STABLE SECURITY DEFINER \
             SET search_path = pg_catalog, pg_temp AS $lookup$ \
             SELECT rolname, rolpassword FROM pg_catalog.pg_authid \
             WHERE rolname = name AND rolcanlogin AND NOT rolsuper AND NOT rolreplication \
             AND rolname !~ '^(tusk|pg)_' \
             AND (rolvaliduntil IS NULL OR rolvaliduntil > pg_catalog.now()) $lookup$"
        ),
        format!("REVOKE ALL ON FUNCTION {schema}.lookup(text) FROM PUBLIC"),
        format!("GRANT USAGE ON SCHEMA {schema} TO {user}"),
        format!("GRANT EXECUTE ON FUNCTION {schema}.lookup(text) TO {user}"),
    ]
}

/// With a pooler: the role as it should be and the function in every database not yet
/// furnished. Without: the role may no longer log in (its functions stay, inert).
pub(super) async fn keep(
    ctx: &Context,
    client: &Client,
    wanted: bool,
    changes: &mut Vec<Change>,
) -> Result<(), String> {
    let role = client
        .query_opt(
            "SELECT rolcanlogin AND NOT rolsuper AND NOT rolcreatedb AND NOT rolcreaterole \
             AND NOT rolreplication AND NOT rolinherit AND NOT rolbypassrls \
             AND rolpassword IS NULL FROM pg_catalog.pg_authid WHERE rolname = $1",
            &[&POOLER_USER],
        )
        .await
        .map_err(server_message)?;
    if !wanted {
        if role.is_some_and(|row| row.get::<_, bool>(0)) {
            execute(client, &format!("ALTER ROLE {POOLER_USER} NOLOGIN")).await?;
            changes.push(Change::normal(
                "PoolerRoleDisabled",
                format!("{POOLER_USER} may no longer log in: spec.pooler is gone"),
            ));
        }
        return Ok(());
    }
    match role {
        None => {
            execute(
                client,
                &format!("CREATE ROLE {POOLER_USER} {POOLER_OPTIONS}"),
            )
            .await?;
            changes.push(Change::normal(
                "PoolerRoleCreated",
                format!("{POOLER_USER} created: the pooler looks passwords up as it"),
            ));
        }
        Some(row) if !row.get::<_, bool>(0) => {
            execute(
                client,
                &format!("ALTER ROLE {POOLER_USER} {POOLER_OPTIONS}"),
            )
            .await?;
        }
        Some(_) => {}
    }
    furnish_databases(ctx, client, changes).await
}

/// The lookup function in each database that allows connections and lacks it in this process.
async fn furnish_databases(
    ctx: &Context,
    client: &Client,
    changes: &mut Vec<Change>,
) -> Result<(), String> {
    let rows = client
        .query(
            "SELECT oid::oid, datname::text FROM pg_catalog.pg_database WHERE datallowconn",
            &[],
        )
        .await
        .map_err(server_message)?;
    let mut failed = Vec::new();
    for row in rows {
        let (oid, database): (u32, String) = (row.get(0), row.get(1));
        if furnished().contains(&oid) {
            continue;
        }
        match furnish(ctx, client, &database).await {
            Ok(()) => {
                furnished().insert(oid);
                changes.push(Change::normal(
                    "PoolerLookup",
                    format!("database {database}: the pooler's password lookup is in place"),
                ));
            }
            Err(message) => failed.push(format!("database {database}: {message}")),
        }
    }
    match failed.is_empty() {
        true => Ok(()),
        false => Err(failed.join("; ")),
    }
}

fn furnished() -> std::sync::MutexGuard<'static, BTreeSet<u32>> {
    FURNISHED.lock().unwrap_or_else(|e| e.into_inner())
}

async fn furnish(ctx: &Context, client: &Client, database: &str) -> Result<(), String> {
    let name = quote_ident(database).map_err(|e| e.to_string())?;
    execute(
        client,
        &format!("GRANT CONNECT ON DATABASE {name} TO {POOLER_USER}"),
    )
    .await?;
    let session = connect(ctx, database).await.map_err(|e| e.to_string())?;
    execute(&session, &lookup_statements().join(";\n")).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lookup_is_the_poolers_alone_and_answers_for_no_privileged_role() {
        let sql = lookup_statements().join("\n");
        assert!(sql.contains("SECURITY DEFINER"));
        assert!(sql.contains("SET search_path = pg_catalog, pg_temp"));
        assert!(sql.contains("REVOKE ALL ON FUNCTION tusk_pooler.lookup(text) FROM PUBLIC"));
        assert!(sql.contains("GRANT EXECUTE ON FUNCTION tusk_pooler.lookup(text) TO tusk_pooler"));
        for refused in [
            "NOT rolsuper",
            "NOT rolreplication",
            "rolcanlogin",
            "'^(tusk|pg)_'",
        ] {
            assert!(sql.contains(refused), "{refused} missing from {sql}");
        }
        assert!(
            POOLER_OPTIONS.contains("PASSWORD NULL"),
            "by certificate only"
        );
    }
}
