//! `GET /upgrade/preflight`: what this primary's databases hold that logical replication cannot
//! carry to a new major (`tusk_contract::upgrade`). Read-only catalog queries, one connection
//! per database, run when asked (an upgrade is requested rarely), never on a timer.

use tusk_contract::upgrade::{DatabasePreflight, UpgradePreflight};

use crate::context::Context;
use crate::error::Error;
use crate::sql;

/// Permanent ordinary and partitioned tables outside the system schemas with neither a primary
/// key nor a replica identity (`'n'`, or the default `'d'` without a primary key; `'i'` names an
/// index and `'f'` the whole row, both carry). A partition is listed on its own: it is
/// replicated through its own identity.
const WITHOUT_REPLICA_IDENTITY: &str = "\
    SELECT format('%I.%I', n.nspname, c.relname) \
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
    WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' \
      AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
      AND n.nspname NOT LIKE 'pg\\_toast%' \
      AND (c.relreplident = 'n' \
           OR (c.relreplident = 'd' AND NOT EXISTS ( \
                 SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))) \
    ORDER BY 1";

const UNLOGGED: &str = "\
    SELECT format('%I.%I', n.nspname, c.relname) \
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
    WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'u' \
    ORDER BY 1";

const LARGE_OBJECTS: &str = "SELECT count(*) FROM pg_largeobject_metadata";

/// Every database that accepts connections (templates excepted) and what each holds.
pub async fn preflight(ctx: &Context) -> Result<UpgradePreflight, Error> {
    let client = sql::connect(ctx, "postgres").await?;
    let wal_level: String = client
        .query_one("SHOW wal_level", &[])
        .await
        .map_err(Error::sql("reading wal_level"))?
        .get(0);
    let names: Vec<String> = client
        .query(
            "SELECT datname FROM pg_database \
             WHERE datallowconn AND NOT datistemplate ORDER BY 1",
            &[],
        )
        .await
        .map_err(Error::sql("listing the databases"))?
        .iter()
        .map(|row| row.get(0))
        .collect();
    drop(client);
    let mut databases = Vec::with_capacity(names.len());
    for name in names {
        databases.push(database(ctx, name).await?);
    }
    Ok(UpgradePreflight {
        wal_level,
        databases,
    })
}

async fn database(ctx: &Context, name: String) -> Result<DatabasePreflight, Error> {
    let client = sql::connect(ctx, &name).await?;
    let names = |query: &'static str, what: &'static str| {
        let client = &client;
        let name = &name;
        async move {
            let rows = client
                .query(query, &[])
                .await
                .map_err(Error::sql(format!("{what} in database {name}")))?;
            Ok::<Vec<String>, Error>(rows.iter().map(|row| row.get(0)).collect())
        }
    };
    let without_replica_identity = names(
        WITHOUT_REPLICA_IDENTITY,
        "listing tables without a replica identity",
    )
    .await?;
    let unlogged = names(UNLOGGED, "listing unlogged tables").await?;
    let large_objects: i64 = client
        .query_one(LARGE_OBJECTS, &[])
        .await
        .map_err(Error::sql(format!(
            "counting large objects in database {name}"
        )))?
        .get(0);
    Ok(DatabasePreflight {
        name,
        without_replica_identity,
        unlogged,
        large_objects,
    })
}
