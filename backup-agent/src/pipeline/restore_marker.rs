//! What a restore attempt leaves for the next one: every database it touches carries a comment
//! marking it as "restore in progress" until the whole restore succeeded. PostgreSQL has no
//! transaction across databases, so a failure (or a killed pod) can leave some databases
//! restored and others not; a new attempt finds the marks and starts over: databases the failed
//! attempt created are dropped, databases that existed (empty) before it are cleaned by
//! `pg_restore --clean`. The marks live in the target itself, so they survive any crash.

use crate::error::AgentError;
use crate::pg::{self, PgParams};

/// The start of every mark.
const MARK: &str = "tusk: restore in progress";

/// How a marked database came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Created by the attempt: dropped by the next one.
    Created,
    /// Existed (empty) before the attempt: cleaned by the next one.
    Existed,
}

impl Origin {
    fn word(self) -> &'static str {
        match self {
            Origin::Created => "created",
            Origin::Existed => "existed",
        }
    }
}

/// The comment that marks a database, e.g. `tusk: restore in progress (created) of backup b1`.
pub fn comment(origin: Origin, backup_id: &str) -> String {
    format!("{MARK} ({}) of backup {backup_id}", origin.word())
}

/// The origin a database comment marks, if it is a mark.
pub fn parse(comment: &str) -> Option<Origin> {
    let rest = comment.strip_prefix(MARK)?.trim_start();
    [Origin::Created, Origin::Existed]
        .into_iter()
        .find(|o| rest.starts_with(&format!("({})", o.word())))
}

/// Marks `database` as being restored.
pub async fn mark(
    pg: &PgParams,
    database: &str,
    origin: Origin,
    backup_id: &str,
) -> Result<(), AgentError> {
    let sql = format!(
        "COMMENT ON DATABASE {} IS {}",
        pg::quote_ident(database),
        quote_literal(&comment(origin, backup_id))
    );
    execute(pg, &sql, &format!("marking database {database:?}")).await
}

/// Removes the marks of a restore that succeeded.
pub async fn unmark(pg: &PgParams, databases: &[String]) -> Result<(), AgentError> {
    for database in databases {
        let sql = format!("COMMENT ON DATABASE {} IS NULL", pg::quote_ident(database));
        execute(pg, &sql, &format!("unmarking database {database:?}")).await?;
    }
    Ok(())
}

/// The marked databases a failed attempt left, by name.
pub async fn leftovers(pg: &PgParams) -> Result<Vec<(String, Origin)>, AgentError> {
    let client = pg.connect(&pg.maintenance_db).await?;
    let rows = client
        .query(
            "SELECT d.datname, shobj_description(d.oid, 'pg_database') FROM pg_database d \
             WHERE shobj_description(d.oid, 'pg_database') LIKE $1 ORDER BY 1",
            &[&format!("{MARK}%")],
        )
        .await
        .map_err(|e| AgentError::Database(format!("looking for unfinished restores: {e}")))?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let comment: String = r.get(1);
            Some((r.get(0), parse(&comment)?))
        })
        .collect())
}

/// Drops `database`, which a failed attempt created, ending any session still in it.
pub async fn drop_database(pg: &PgParams, database: &str) -> Result<(), AgentError> {
    let sql = format!(
        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
        pg::quote_ident(database)
    );
    execute(pg, &sql, &format!("dropping database {database:?}")).await?;
    tracing::info!(database, "dropped a database an unfinished restore created");
    Ok(())
}

async fn execute(pg: &PgParams, sql: &str, what: &str) -> Result<(), AgentError> {
    let client = pg.connect(&pg.maintenance_db).await?;
    client
        .batch_execute(sql)
        .await
        .map_err(|e| AgentError::Database(format!("{what}: {e}")))
}

/// A SQL string literal (standard_conforming_strings is on since PostgreSQL 9.1).
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_other_comments_are_not_marks() {
        for origin in [Origin::Created, Origin::Existed] {
            assert_eq!(parse(&comment(origin, "b1")), Some(origin));
        }
        assert_eq!(parse("the app's database"), None);
        assert_eq!(
            parse("tusk: restore in progress (other) of backup b1"),
            None
        );
        assert_eq!(quote_literal("it's"), "'it''s'");
    }
}
