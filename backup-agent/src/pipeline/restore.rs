//! `restore`: every file is downloaded and verified before anything touches the target, then
//! globals are replayed and each database is restored in one transaction, followed by its
//! database-level properties (`db_properties`). There is no transaction across databases: a
//! failure drops the databases this attempt created and says what is left, and marks (see
//! `restore_marker`) let a new attempt finish the clean-up.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::db_properties;
use super::globals_filter::{GlobalsFilter, is_fatal_psql_error};
use super::restore_marker::{self, Origin};
use super::verify::{download_checked, open_decoded};
use crate::error::AgentError;
use crate::pg::{self, PgParams};
use backup_store::catalog;
use backup_store::layout::ClusterLocation;
use backup_store::manifest::{FileKind, Manifest, Method};
use backup_store::store::ObjectStore;

pub struct RestoreOptions {
    pub location: ClusterLocation,
    /// An id or `latest`.
    pub backup_id: String,
    /// Restore over databases that already hold objects (`pg_restore --clean`).
    pub force: bool,
    /// Where verified downloads wait to be applied; the system temp dir when `None`.
    pub work_dir: Option<PathBuf>,
    /// Roles that keep their target attributes and password when they already exist there
    /// (the connecting user always does).
    pub preserve_roles: Vec<String>,
}

pub async fn run_restore(
    store: &dyn ObjectStore,
    pg: &PgParams,
    options: &RestoreOptions,
    cancel: &CancellationToken,
) -> Result<Manifest, AgentError> {
    let manifest = catalog::resolve(
        store,
        &options.location,
        &options.backup_id,
        Some(Method::Logical),
    )
    .await?;
    if manifest.format_version > backup_store::manifest::FORMAT_VERSION {
        return Err(AgentError::Other(format!(
            "backup {} has manifest format {}, newer than this agent understands",
            manifest.backup_id, manifest.format_version
        )));
    }
    // What a failed attempt left is undone first (see `restore_marker`).
    let mut reclean = Vec::new();
    for (database, origin) in restore_marker::leftovers(pg).await? {
        match origin {
            Origin::Created => restore_marker::drop_database(pg, &database).await?,
            Origin::Existed => reclean.push(database),
        }
    }
    let existing = pg.database_names().await?;
    let mut occupied = Vec::new();
    for db in manifest.files.iter().filter_map(|f| f.database.as_deref()) {
        let left_by_us = reclean.iter().any(|r| r == db);
        if !left_by_us && existing.iter().any(|e| e == db) && pg.database_has_objects(db).await? {
            occupied.push(db.to_string());
        }
    }
    if !occupied.is_empty() && !options.force {
        return Err(AgentError::TargetNotEmpty(format!(
            "database(s) {occupied:?} already hold objects"
        )));
    }
    tracing::info!(backup_id = %manifest.backup_id, files = manifest.files.len(), "restore starting");

    // Verify everything first: a corrupt file must leave the target untouched.
    let dir = match &options.work_dir {
        Some(d) => tempfile::Builder::new()
            .prefix("tusk-restore-")
            .tempdir_in(d),
        None => tempfile::Builder::new().prefix("tusk-restore-").tempdir(),
    }
    .map_err(|e| AgentError::io("creating the restore work directory", e))?;
    // The manifest comes from the bucket, so its file names are not trusted as local paths:
    // each download is named by its position in the manifest.
    let local: Vec<PathBuf> = (0..manifest.files.len())
        .map(|i| dir.path().join(format!("file-{i}")))
        .collect();
    for (file, path) in manifest.files.iter().zip(&local) {
        let mut out = tokio::fs::File::create(&path)
            .await
            .map_err(|e| AgentError::io(format!("creating {}", path.display()), e))?;
        download_checked(store, &options.location, &manifest, file, &mut out, cancel).await?;
    }

    for (file, path) in manifest.files.iter().zip(&local) {
        if file.kind == FileKind::Globals {
            apply_globals(pg, &manifest, path, &options.preserve_roles).await?;
        }
    }
    let mut attempt = Attempt::default();
    let mut finished = Vec::new();
    for (file, path) in manifest.files.iter().zip(&local) {
        if file.kind != FileKind::Database {
            continue;
        }
        let Some(database) = file.database.as_deref() else {
            let error =
                AgentError::Integrity(format!("manifest entry {} names no database", file.name));
            return Err(attempt.failed(pg, error, None).await);
        };
        let clean = (options.force && occupied.iter().any(|o| o == database))
            || reclean.iter().any(|r| r == database);
        let applied = async {
            let properties = db_properties::read(pg, &manifest, database, path, cancel).await?;
            let origin = if existing.iter().any(|e| e == database) {
                properties.check_existing(pg).await?;
                Origin::Existed
            } else {
                properties
                    .create(pg, file.database_owner.as_deref())
                    .await?;
                Origin::Created
            };
            attempt.touched(database, origin);
            restore_marker::mark(pg, database, origin, &manifest.backup_id).await?;
            apply_database(pg, &manifest, database, path, clean, cancel).await?;
            properties.apply_settings(pg).await?;
            Ok(properties)
        }
        .await;
        match applied {
            Ok(properties) => {
                attempt.restored.push(database.to_owned());
                finished.push(properties);
            }
            Err(e) => return Err(attempt.failed(pg, e, Some(database)).await),
        }
    }
    // Each database's own comment (or none) replaces its mark only now: see `db_properties`.
    for properties in &finished {
        properties.apply_comment(pg).await?;
    }
    Ok(manifest)
}

/// What one restore attempt did to the target, to undo or report it when a database fails.
#[derive(Default)]
struct Attempt {
    /// Databases this attempt created.
    created: Vec<String>,
    /// Databases that existed (empty) and this attempt restored into.
    existed: Vec<String>,
    /// Databases completely restored.
    restored: Vec<String>,
}

impl Attempt {
    fn touched(&mut self, database: &str, origin: Origin) {
        match origin {
            Origin::Created => self.created.push(database.to_owned()),
            Origin::Existed => self.existed.push(database.to_owned()),
        }
    }

    /// Drops the databases this attempt created, so the target holds only what existed before
    /// (plus the roles from the globals), and says exactly that.
    async fn failed(self, pg: &PgParams, error: AgentError, at: Option<&str>) -> AgentError {
        let mut dropped = Vec::new();
        let mut left = Vec::new();
        for database in &self.created {
            match restore_marker::drop_database(pg, database).await {
                Ok(()) => dropped.push(database.clone()),
                Err(e) => {
                    tracing::warn!(error = %e, database, "cannot drop a database this restore created");
                    left.push(database.clone());
                }
            }
        }
        let kept: Vec<&String> = self
            .restored
            .iter()
            .filter(|d| self.existed.contains(d))
            .collect();
        let mut state = match at {
            Some(database) => format!("while restoring database {database:?}; "),
            None => String::new(),
        };
        state.push_str(&format!(
            "roles from the backup's globals were applied; databases restored before the \
             failure: {:?}; dropped again (this attempt created them): {dropped:?}",
            self.restored
        ));
        if !kept.is_empty() || !left.is_empty() {
            state.push_str(&format!(
                "; still holding restored data (a new attempt cleans them): {:?}",
                kept.into_iter().chain(&left).collect::<Vec<_>>()
            ));
        }
        AgentError::Partial {
            source: Box::new(error),
            state,
        }
    }
}

async fn apply_globals(
    pg: &PgParams,
    manifest: &Manifest,
    path: &Path,
    preserve: &[String],
) -> Result<(), AgentError> {
    let args = ["-X", "-q", "--no-password", "-v", "ON_ERROR_STOP=0"].map(String::from);
    let mut psql = pg::spawn_tool(pg, "psql", &args, true, false)?;
    let mut stdin = psql.take_stdin()?;
    let mut candidates = preserve.to_vec();
    candidates.push(pg.user.clone());
    let client = pg.connect(&pg.maintenance_db).await?;
    let existing: Vec<String> = client
        .query(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY($1)",
            &[&candidates],
        )
        .await
        .map_err(|e| AgentError::Database(format!("listing roles: {e}")))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    drop(client);
    let filter = GlobalsFilter::new(&existing);
    let mut lines = BufReader::new(open_decoded(manifest, path).await?).lines();
    let fed: Result<(), AgentError> = async {
        while let Some(line) = lines
            .next_line()
            .await
            .map_err(|e| AgentError::Integrity(format!("decompressing globals: {e}")))?
        {
            if filter.keep(&line) {
                stdin
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .map_err(|e| AgentError::io("feeding globals to psql", e))?;
            }
        }
        Ok(())
    }
    .await;
    drop(stdin);
    let stderr = psql.finish().await?;
    fed?;
    let fatal: Vec<&str> = stderr.lines().filter(|l| is_fatal_psql_error(l)).collect();
    if !fatal.is_empty() {
        return Err(AgentError::Tool {
            tool: "psql (globals)".into(),
            status: "errors".into(),
            stderr: fatal.join("\n"),
        });
    }
    tracing::info!("globals restored");
    Ok(())
}

async fn apply_database(
    pg: &PgParams,
    manifest: &Manifest,
    database: &str,
    path: &Path,
    clean: bool,
    cancel: &CancellationToken,
) -> Result<(), AgentError> {
    let mut args = vec![
        "--single-transaction".to_string(),
        "--exit-on-error".to_string(),
        "--no-password".to_string(),
        format!("--dbname={}", pg::quote_conninfo(database)),
    ];
    if clean {
        args.extend(["--clean".to_string(), "--if-exists".to_string()]);
    }
    let mut restore = pg::spawn_tool(pg, "pg_restore", &args, true, false)?;
    let mut stdin = restore.take_stdin()?;
    let mut decoded = open_decoded(manifest, path).await?;
    let copied = tokio::select! {
        copied = tokio::io::copy(&mut decoded, &mut stdin) => copied,
        () = cancel.cancelled() => return Err(AgentError::Interrupted),
    };
    drop(stdin);
    // pg_restore's own error explains a broken pipe better than the pipe does.
    restore.finish().await?;
    let bytes =
        copied.map_err(|e| AgentError::io(format!("feeding {database:?} to pg_restore"), e))?;
    tracing::info!(database, bytes, "database restored");
    Ok(())
}
