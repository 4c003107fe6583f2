//! Database-level properties: encoding and locale, `ALTER DATABASE … SET`, `ALTER ROLE … IN
//! DATABASE … SET`, grants on the database and its comment.
//!
//! pg_dump stores them in every archive (TOC entries `DATABASE`, `DATABASE PROPERTIES`, and the
//! database's `ACL` and `COMMENT`), but pg_restore emits them only with `--create`, which it
//! refuses together with `--single-transaction`. So the agent restores the contents as before
//! and takes the properties from the same verified local archive: `pg_restore --list --create`
//! reads the TOC, `pg_restore --create --use-list … --file=-` renders the four entries as SQL
//! (nothing connects), and `render` splits that text:
//! - the `CREATE DATABASE` options (encoding, locale, provider) go into the agent's own
//!   `CREATE DATABASE … WITH TEMPLATE = template0`, like `pg_restore --create` does;
//! - settings and grants run in one psql transaction right after the contents committed, in the
//!   same step of the restore: before, `ALTER DATABASE … SET default_transaction_read_only` or
//!   a `search_path` would already apply to pg_restore's session; in pg_restore's transaction
//!   they cannot be (it owns its connection). A failure is undone like a failed `pg_restore`:
//!   the database is dropped if the attempt created it, else it stays marked and the next
//!   attempt cleans it and applies them again (every statement is idempotent);
//! - the comment replaces the restore mark (`restore_marker`) once the whole restore
//!   succeeded: applied earlier, it would erase the mark the next attempt relies on.
//!
//! A database that already exists keeps its encoding and locale: it is empty (or `--force`),
//! and recreating it would drop what the operator set up there (e.g. the image's `app`). The
//! data converts (PostgreSQL fails loudly on characters the target encoding cannot hold) and
//! indexes are rebuilt under the target's collation, so the restore is correct; a difference
//! is logged as a warning naming both, since sort order and character range may differ.

mod render;

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::verify::open_decoded;
use crate::error::AgentError;
use crate::pg::{self, PgParams};
use backup_store::manifest::Manifest;
use render::{CreateOption, Locale, Rendered};

/// One database's properties as the backup recorded them.
pub struct DatabaseProperties {
    database: String,
    rendered: Rendered,
    options: Vec<CreateOption>,
}

/// Reads the properties of `database` from its verified local archive at `path`.
pub async fn read(
    pg: &PgParams,
    manifest: &Manifest,
    database: &str,
    path: &Path,
    cancel: &CancellationToken,
) -> Result<DatabaseProperties, AgentError> {
    let context = |e: String| {
        AgentError::Other(format!(
            "reading the database properties of {database:?}: {e}"
        ))
    };
    let list = ["--list", "--create"].map(String::from);
    let toc = render_archive(pg, manifest, path, &list, cancel).await?;
    let selected = path.with_extension("database-entries");
    tokio::fs::write(
        &selected,
        render::select_entries(&String::from_utf8_lossy(&toc)),
    )
    .await
    .map_err(|e| AgentError::io(format!("writing {}", selected.display()), e))?;
    let args = [
        "--create".to_string(),
        "--file=-".to_string(),
        format!("--use-list={}", selected.display()),
    ];
    let text = render_archive(pg, manifest, path, &args, cancel).await?;
    let rendered = render::split(&text).map_err(context)?;
    let options = match &rendered.create {
        Some(statement) => render::parse_create(statement).map_err(context)?,
        None => Vec::new(),
    };
    Ok(DatabaseProperties {
        database: database.to_owned(),
        rendered,
        options,
    })
}

impl DatabaseProperties {
    /// Creates the database with the backup's encoding and locale, owned by `owner` when that
    /// role exists (it does after the globals, unless the backup's globals lack it).
    pub async fn create(&self, pg: &PgParams, owner: Option<&str>) -> Result<(), AgentError> {
        let database = &self.database;
        let client = pg.connect(&pg.maintenance_db).await?;
        let mut sql = format!("CREATE DATABASE {}", pg::quote_ident(database));
        // Without pg_dump's options (an archive without a DATABASE entry) the target's defaults
        // apply, as before; with them template0 is needed for another encoding or locale.
        if !self.options.is_empty() {
            sql.push_str(" WITH TEMPLATE = template0");
            sql.push_str(&render::create_clause(&self.options));
        }
        if let Some(owner) = owner {
            let exists = client
                .query_one(
                    "SELECT count(*) FROM pg_roles WHERE rolname = $1",
                    &[&owner],
                )
                .await
                .map_err(|e| AgentError::Database(format!("looking up role {owner:?}: {e}")))?
                .get::<_, i64>(0)
                > 0;
            if exists {
                sql.push_str(&format!(" OWNER = {}", pg::quote_ident(owner)));
            }
        }
        client
            .batch_execute(&sql)
            .await
            .map_err(|e| AgentError::Database(format!("creating database {database:?}: {e}")))?;
        tracing::info!(database, locale = ?Locale::of(&self.options), "database created");
        Ok(())
    }

    /// Warns when an existing database's encoding or locale differs from the backup's (see the
    /// module's documentation for why the restore goes on).
    pub async fn check_existing(&self, pg: &PgParams) -> Result<(), AgentError> {
        let Some(backup) = Locale::of(&self.options) else {
            return Ok(());
        };
        let client = pg.connect(&pg.maintenance_db).await?;
        let row = client
            .query_one(
                "SELECT pg_encoding_to_char(encoding)::text, datcollate::text, datctype::text \
                 FROM pg_database WHERE datname = $1",
                &[&self.database],
            )
            .await
            .map_err(|e| {
                AgentError::Database(format!("reading database {:?}: {e}", self.database))
            })?;
        let target = Locale {
            encoding: row.get(0),
            collate: row.get(1),
            ctype: row.get(2),
        };
        if target != backup {
            tracing::warn!(
                database = %self.database,
                "restoring into the existing database with {target}; the backup's had {backup}: \
                 the data is converted, sorting and the characters it can hold follow the target"
            );
        }
        Ok(())
    }

    /// Applies the settings and grants in one transaction.
    pub async fn apply_settings(&self, pg: &PgParams) -> Result<(), AgentError> {
        if let Some(script) = &self.rendered.settings {
            run_psql(pg, &self.database, script, "settings and grants").await?;
            tracing::info!(database = %self.database, "database settings and grants restored");
        }
        Ok(())
    }

    /// Replaces the restore mark with the backup's comment, or none.
    pub async fn apply_comment(&self, pg: &PgParams) -> Result<(), AgentError> {
        match &self.rendered.comment {
            Some(script) => run_psql(pg, &self.database, script, "comment").await,
            None => super::restore_marker::unmark(pg, std::slice::from_ref(&self.database)).await,
        }
    }
}

/// Runs `script` in one transaction connected to `database` itself, as `pg_restore --create`
/// would after its `\connect`: `client_encoding` is the archive's, and the database's own
/// encoding then keeps a comment's bytes as they were.
async fn run_psql(
    pg: &PgParams,
    database: &str,
    script: &[u8],
    what: &str,
) -> Result<(), AgentError> {
    let args = [
        "-X".to_string(),
        "-q".to_string(),
        "--no-password".to_string(),
        "--single-transaction".to_string(),
        "-v".to_string(),
        "ON_ERROR_STOP=1".to_string(),
        format!("--dbname={}", pg::quote_conninfo(database)),
    ];
    let mut psql = pg::spawn_tool(pg, "psql", &args, true, false)?;
    let mut stdin = psql.take_stdin()?;
    let fed = stdin.write_all(script).await;
    drop(stdin);
    let relabel = |e: AgentError| match e {
        AgentError::Tool { status, stderr, .. } => AgentError::Tool {
            tool: format!("psql (the {what} of database {database:?})"),
            status,
            stderr,
        },
        other => other,
    };
    psql.finish().await.map_err(relabel)?;
    fed.map_err(|e| AgentError::io(format!("feeding the {what} of {database:?} to psql"), e))
}

/// Runs pg_restore over the decoded archive and returns its stdout. It reads only the TOC at
/// the archive's start and may exit before the rest was fed: a broken pipe is then expected.
async fn render_archive(
    pg: &PgParams,
    manifest: &Manifest,
    path: &Path,
    args: &[String],
    cancel: &CancellationToken,
) -> Result<Vec<u8>, AgentError> {
    let mut tool = pg::spawn_tool(pg, "pg_restore", args, true, true)?;
    let mut stdin = tool.take_stdin()?;
    let mut stdout = tool.take_stdout()?;
    let mut decoded = open_decoded(manifest, path).await?;
    let feed = async {
        let copied = tokio::io::copy(&mut decoded, &mut stdin).await;
        drop(stdin);
        copied
    };
    let mut out = Vec::new();
    let (copied, read) = tokio::select! {
        both = async { tokio::join!(feed, stdout.read_to_end(&mut out)) } => both,
        () = cancel.cancelled() => return Err(AgentError::Interrupted),
    };
    tool.finish().await?;
    read.map_err(|e| AgentError::io("reading pg_restore's output", e))?;
    match copied {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(AgentError::io(
            format!("feeding {} to pg_restore", path.display()),
            e,
        )),
        _ => Ok(out),
    }
}
