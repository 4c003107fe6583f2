//! `verify-restore`: proves a backup restorable. Its files are checked for presence, the backup
//! is restored by the same code as `restore` (which verifies every size and sha256 before
//! applying anything) into a throwaway server (`scratch`), and the result is checked: every
//! database present, `pg_amcheck` clean, tables and row counts equal to those recorded at
//! backup time. The outcome is a [`Report`]: `Passed`, `Failed` (the backup is bad, the first
//! failed check named) or `Error` (the verification could not run; the error says why).

mod checks;
mod physical;
pub mod report;
mod scratch;

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::restore::{self, RestoreOptions};
use crate::error::AgentError;
use crate::pg::{self, PgParams, SslMode};
use backup_store::CatalogError;
use backup_store::catalog;
use backup_store::layout::ClusterLocation;
use backup_store::manifest::{FileKind, Manifest, Method};
use backup_store::store::ObjectStore;
use report::{Checks, Totals};
pub use report::{Outcome, Phase, Report};
use scratch::ScratchServer;

pub struct VerifyRestoreOptions {
    pub location: ClusterLocation,
    /// An id or `latest`.
    pub backup_id: String,
    /// Parent of the scratch server's directory; the system temp dir when `None`.
    pub scratch_dir: Option<PathBuf>,
    /// Where initdb, postgres, pg_ctl, pg_restore, psql and pg_amcheck are; PATH when `None`.
    pub bin_dir: Option<PathBuf>,
    /// How long the scratch server may take to accept connections.
    pub startup_timeout: Duration,
    /// The bucket as variables, for the restore command a physical backup's recovery runs.
    pub store_env: Vec<(String, String)>,
}

/// The report, and for [`Phase::Error`] the error that stopped the verification.
pub struct Verification {
    pub report: Report,
    pub error: Option<AgentError>,
}

pub async fn run_verify_restore(
    store: &dyn ObjectStore,
    options: &VerifyRestoreOptions,
    cancel: &CancellationToken,
) -> Verification {
    let started = jiff::Timestamp::now();
    tracing::info!(backup_id = %options.backup_id, "verification starting");
    let mut checks = Checks::default();
    let mut totals = Totals::default();
    let mut backup_id = None;
    let result = verify(
        store,
        options,
        cancel,
        &mut checks,
        &mut totals,
        &mut backup_id,
    )
    .await;
    let error = result.err();
    if let Some(e) = &error {
        checks.skip_rest(&format!("the verification could not run: {e}"));
    }
    let report = Report::new(
        backup_id,
        checks,
        totals,
        error.as_ref().map(ToString::to_string),
        started,
        jiff::Timestamp::now(),
    );
    Verification { report, error }
}

async fn verify(
    store: &dyn ObjectStore,
    options: &VerifyRestoreOptions,
    cancel: &CancellationToken,
    checks: &mut Checks,
    totals: &mut Totals,
    backup_id: &mut Option<String>,
) -> Result<(), AgentError> {
    // `latest` is the newest logical backup; a physical one is verified when named.
    let method = (options.backup_id == "latest").then_some(Method::Logical);
    let manifest =
        match catalog::resolve(store, &options.location, &options.backup_id, method).await {
            Ok(manifest) => manifest,
            Err(e @ CatalogError::InvalidManifest { .. }) => {
                *backup_id = Some(options.backup_id.clone());
                checks.fail("checksums", e.to_string());
                checks.skip_rest("the manifest is unreadable");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
    *backup_id = Some(manifest.backup_id.clone());
    if manifest.method() == Method::Physical {
        *checks = Checks::physical();
        return physical::verify(store, options, &manifest, cancel, checks, totals).await;
    }
    if missing_files(store, &options.location, &manifest, checks).await? {
        checks.skip_rest("files of the backup are missing from the bucket");
        return Ok(());
    }
    check_tool_version(options, &manifest).await?;
    // At a signal the future holding the server is dropped and `Drop` stops and removes it;
    // otherwise `stop` does, whatever the outcome.
    let mut server = tokio::select! {
        started = ScratchServer::start(
            options.scratch_dir.as_deref(),
            options.bin_dir.clone(),
            options.startup_timeout,
        ) => started?,
        () = cancel.cancelled() => return Err(AgentError::Interrupted),
    };
    let outcome = tokio::select! {
        outcome = restore_and_check(store, options, &manifest, &mut server, cancel, checks, totals) => outcome,
        () = cancel.cancelled() => Err(AgentError::Interrupted),
    };
    server.stop().await;
    outcome
}

/// pg_restore refuses archives of a newer pg_dump: that is the verifying image's fault (it
/// must be the backup's major or newer), not the backup's, so it stops here as an error.
async fn check_tool_version(
    options: &VerifyRestoreOptions,
    manifest: &Manifest,
) -> Result<(), AgentError> {
    let tools = PgParams {
        host: String::new(),
        port: 0,
        user: String::new(),
        password: None,
        maintenance_db: String::new(),
        bin_dir: options.bin_dir.clone(),
        connect_timeout: Duration::ZERO,
        hostaddr: None,
        ssl_mode: SslMode::Disable,
        ssl_root_cert: None,
        client_certificate: None,
    };
    let restore = pg::tool_version(&tools, "pg_restore").await?;
    match (
        pg::parse_major(&restore),
        pg::parse_major(&manifest.pg_dump_version),
    ) {
        (Some(have), Some(dumped)) if have < dumped => Err(AgentError::Usage(format!(
            "{restore} cannot restore a backup of {}: run verify-restore with PostgreSQL \
             {dumped} or newer (e.g. the postgres:{dumped} image)",
            manifest.pg_dump_version
        ))),
        _ => Ok(()),
    }
}

/// A database file (or the globals) listed in the manifest but absent from the bucket fails
/// `databases` (or `checksums`) before anything is downloaded. Returns whether any is missing.
async fn missing_files(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    manifest: &Manifest,
    checks: &mut Checks,
) -> Result<bool, AgentError> {
    let prefix = location.backup_prefix(&manifest.backup_id);
    let present: Vec<String> = store
        .list(&prefix)
        .await?
        .into_iter()
        .map(|o| o.key)
        .collect();
    let absent = |kind: FileKind| -> Vec<String> {
        manifest
            .files
            .iter()
            .filter(|f| f.kind == kind)
            .filter(|f| !present.contains(&location.object_key(&manifest.backup_id, &f.name)))
            .map(|f| match &f.database {
                Some(db) => format!("{db:?} ({})", f.name),
                None => f.name.clone(),
            })
            .collect()
    };
    let (globals, databases) = (absent(FileKind::Globals), absent(FileKind::Database));
    if !globals.is_empty() {
        checks.fail(
            "checksums",
            format!("missing from the bucket: {}", globals.join(", ")),
        );
    }
    if !databases.is_empty() {
        checks.fail(
            "databases",
            format!(
                "the dumps of these databases are missing from the bucket: {}",
                databases.join(", ")
            ),
        );
    }
    Ok(!globals.is_empty() || !databases.is_empty())
}

async fn restore_and_check(
    store: &dyn ObjectStore,
    options: &VerifyRestoreOptions,
    manifest: &Manifest,
    server: &mut ScratchServer,
    cancel: &CancellationToken,
    checks: &mut Checks,
    totals: &mut Totals,
) -> Result<(), AgentError> {
    let pg = server.params(Duration::from_secs(10));
    let restore_options = RestoreOptions {
        location: options.location.clone(),
        backup_id: manifest.backup_id.clone(),
        force: false,
        work_dir: Some(server.work_dir()),
        preserve_roles: Vec::new(),
    };
    // The very restore a real `restore` runs: download with checks, globals, each database.
    match restore::run_restore(store, &pg, &restore_options, cancel).await {
        Ok(_) => {
            checks.pass(
                "checksums",
                format!(
                    "{} files, {} bytes: sizes and sha256 equal the manifest's",
                    manifest.files.len(),
                    manifest.total_size_bytes()
                ),
            );
            checks.pass(
                "restore",
                "globals and every database restored without errors",
            );
        }
        Err(e) => {
            let running = server.is_running();
            return match classify(&e, running) {
                Blame::Checksums => {
                    checks.fail("checksums", e.to_string());
                    checks.skip_rest("the backup's files are not intact");
                    Ok(())
                }
                Blame::Restore => {
                    checks.pass("checksums", "sizes and sha256 equal the manifest's");
                    checks.fail("restore", e.to_string());
                    checks.skip_rest("the restore failed");
                    Ok(())
                }
                Blame::Environment if !running => Err(AgentError::Other(format!(
                    "{e}; the scratch PostgreSQL exited: {}",
                    server.log_tail()
                ))),
                Blame::Environment => Err(e),
            };
        }
    }
    let present = pg.database_names().await?;
    let (outcome, message) = checks::databases(manifest, &present);
    checks.set("databases", outcome, message);
    totals.databases = checks::manifest_databases(manifest).len() as u64;
    let (outcome, message) = checks::amcheck(&pg).await?;
    checks.set("amcheck", outcome, message);
    let (outcome, message, tables, rows) = checks::counts(&pg, manifest, &present).await?;
    checks.set("counts", outcome, message);
    (totals.tables, totals.rows) = (tables, rows);
    Ok(())
}

/// Who a failed restore tells about.
#[derive(Debug, PartialEq, Eq)]
enum Blame {
    /// A file's size or sha256 differs from the manifest.
    Checksums,
    /// The backup's contents do not restore: pg_restore, psql or a database property failed
    /// while the scratch server kept running.
    Restore,
    /// The store, the scratch server, the disk or a signal: nothing is known about the backup.
    Environment,
}

fn classify(error: &AgentError, server_running: bool) -> Blame {
    let error = match error {
        AgentError::Partial { source, .. } => source.as_ref(),
        other => other,
    };
    let text = error.to_string();
    let environment = !server_running
        || text.contains("No space left on device")
        || text.contains("out of memory");
    match error {
        AgentError::Checksum(_) => Blame::Checksums,
        _ if environment => Blame::Environment,
        AgentError::Catalog(CatalogError::InvalidManifest { .. }) => Blame::Checksums,
        AgentError::Integrity(_) | AgentError::Tool { .. } => Blame::Restore,
        // Statements the agent runs itself (CREATE DATABASE with the backup's locale, its
        // settings): the backup does not restore here. Not a refused connection, though.
        AgentError::Database(message) if !message.starts_with("cannot connect") => Blame::Restore,
        _ => Blame::Environment,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_blamed_on_the_backup_only_when_it_is_the_cause() {
        let tool = AgentError::Tool {
            tool: "pg_restore".into(),
            status: "exit status: 1".into(),
            stderr: "ERROR: syntax error".into(),
        };
        let partial = AgentError::Partial {
            source: Box::new(tool),
            state: "dropped".into(),
        };
        assert_eq!(classify(&partial, true), Blame::Restore);
        assert_eq!(classify(&partial, false), Blame::Environment);
        assert_eq!(
            classify(&AgentError::Checksum("sha".into()), false),
            Blame::Checksums
        );
        let full = AgentError::Tool {
            tool: "pg_restore".into(),
            status: "exit status: 1".into(),
            stderr: "could not extend file: No space left on device".into(),
        };
        assert_eq!(classify(&full, true), Blame::Environment);
        let refused = AgentError::Database("cannot connect to postgres@/tmp:5432".into());
        assert_eq!(classify(&refused, true), Blame::Environment);
        let locale = AgentError::Database("creating database \"app\": invalid locale".into());
        assert_eq!(classify(&locale, true), Blame::Restore);
        assert_eq!(classify(&AgentError::Interrupted, true), Blame::Environment);
    }
}
