//! Exact row counts of a database's user tables: recorded at backup time inside the snapshot
//! pg_dump uses (`--snapshot`), and counted again after a verification restore.
//!
//! Cost: `count(*)` reads every table once more, so recording counts adds roughly one
//! sequential scan of the database to each backup (measured in the README's performance
//! section); `--record-counts=false` turns it off.

use std::time::Duration;

use tokio_postgres::Client;

use super::{PgParams, quote_ident};
use crate::error::AgentError;
use backup_store::manifest::TableCount;

/// The tables whose rows pg_dump dumps: ordinary tables (partitions included, partitioned
/// parents excluded since their rows live in the partitions), not temporary, outside the system
/// schemas and not members of an extension (their rows are the extension's, not dumped).
const USER_TABLES: &str = "\
    SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
    WHERE c.relkind = 'r' AND c.relpersistence <> 't' \
      AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
      AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%' \
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass \
                      AND d.objid = c.oid AND d.deptype = 'e') \
    ORDER BY 1, 2";

/// Every user table of the connected database with its exact row count, in the snapshot of
/// the client's current transaction (or a fresh one per statement outside a transaction).
pub async fn count_tables(client: &Client, database: &str) -> Result<Vec<TableCount>, AgentError> {
    let context = |e: tokio_postgres::Error| {
        AgentError::Database(format!("counting rows in database {database:?}: {e}"))
    };
    let tables = client.query(USER_TABLES, &[]).await.map_err(context)?;
    let mut counts = Vec::with_capacity(tables.len());
    for table in &tables {
        let (schema, name): (String, String) = (table.get(0), table.get(1));
        // ONLY: pg_dump copies each table's own rows; inheritance children are counted apart.
        let sql = format!(
            "SELECT count(*) FROM ONLY {}.{}",
            quote_ident(&schema),
            quote_ident(&name)
        );
        let rows: i64 = client.query_one(&sql, &[]).await.map_err(context)?.get(0);
        counts.push(TableCount {
            schema,
            name,
            rows: u64::try_from(rows).unwrap_or(0),
        });
    }
    Ok(counts)
}

/// An open REPEATABLE READ transaction whose snapshot pg_dump imports, with the counts taken in
/// it. It must live until pg_dump has finished (an exported snapshot ends with its transaction).
pub struct DumpSnapshot {
    client: Client,
    /// The id for `pg_dump --snapshot`.
    pub id: String,
    pub tables: Vec<TableCount>,
}

impl DumpSnapshot {
    /// Exports a snapshot of `database` and counts its tables in it. `Ok(None)` when that is not
    /// possible (e.g. exporting snapshots is refused, or a table cannot be counted within
    /// `lock_timeout`): the warning says why and the backup goes on without counts, dumped
    /// with pg_dump's own snapshot as before.
    pub async fn open(
        pg: &PgParams,
        database: &str,
        lock_timeout: Duration,
    ) -> Result<Option<DumpSnapshot>, AgentError> {
        let client = pg.connect(database).await?;
        // row_security off like pg_dump: a table it could not dump fully fails here as well.
        let setup = format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
             SET LOCAL lock_timeout = {}; SET LOCAL row_security = off",
            lock_timeout.as_millis().max(1)
        );
        let opened = async {
            client.batch_execute(&setup).await?;
            let row = client.query_one("SELECT pg_export_snapshot()", &[]).await?;
            Ok::<String, tokio_postgres::Error>(row.get(0))
        }
        .await;
        let id = match opened {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(database, error = %e, "cannot export a snapshot: row counts not recorded for this database");
                return Ok(None);
            }
        };
        match count_tables(&client, database).await {
            Ok(tables) => Ok(Some(DumpSnapshot { client, id, tables })),
            Err(e) => {
                tracing::warn!(database, error = %e, "row counts not recorded for this database");
                Ok(None)
            }
        }
    }

    /// Ends the transaction once pg_dump is done with the snapshot.
    pub async fn close(self) {
        if let Err(e) = self.client.batch_execute("COMMIT").await {
            tracing::warn!(error = %e, "ending the snapshot transaction");
        }
    }
}
