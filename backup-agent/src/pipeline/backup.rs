//! `backup`: globals and each database dumped, compressed and uploaded; manifest last.

use std::time::Duration;

use tokio::io::BufReader;
use tokio_util::sync::CancellationToken;

use super::stream_upload::{StoredObject, upload_stream};
use crate::compression::{Codec, Compression};
use crate::error::AgentError;
use crate::pg::counts::DumpSnapshot;
use crate::pg::{self, DatabaseInfo, PgParams};
use backup_store::claim::{self, Claim};
use backup_store::layout::{self, ClusterLocation};
use backup_store::manifest::{FORMAT_VERSION, FileKind, Manifest, ManifestFile};
use backup_store::store::ObjectStore;

pub struct BackupOptions {
    pub location: ClusterLocation,
    pub backup_id: String,
    pub compression: Compression,
    /// Databases to dump; every non-template database when empty.
    pub databases: Vec<String>,
    /// How long pg_dump waits for each table lock before failing.
    pub lock_wait_timeout: Duration,
    /// The owning PostgreSQL's uid, recorded in the claim and the manifest.
    pub cluster_uid: Option<String>,
    /// Same for every retry of one run (the Job's uid): lets a retried pod take over its claim.
    pub writer: Option<String>,
    /// Count every table's rows in the dump's snapshot and record them in the manifest.
    pub record_counts: bool,
}

pub async fn run_backup(
    store: &dyn ObjectStore,
    pg: &PgParams,
    options: &BackupOptions,
    cancel: &CancellationToken,
) -> Result<Manifest, AgentError> {
    let started_at = jiff::Timestamp::now();
    layout::validate_backup_id(&options.backup_id)?;

    // Cheap checks first, so a bad password or bucket fails before any dump starts.
    let client = pg.connect(&pg.maintenance_db).await?;
    let server = PgParams::server_info(&client).await?;
    let databases = select_databases(PgParams::databases(&client).await?, &options.databases)?;
    drop(client);
    let pg_dump_version = pg::tool_version(pg, "pg_dump").await?;
    check_dump_version(&pg_dump_version, server.version_num)?;
    ensure_new(store, &options.location, &options.backup_id).await?;
    let manifest_key = options.location.manifest_key(&options.backup_id);
    // Before any upload: a second writer of this id (another cluster sharing the prefix) stops
    // here, having neither overwritten nor (on cleanup) deleted the first one's objects.
    let run = Claim {
        cluster_uid: options.cluster_uid.clone(),
        writer: options.writer.clone(),
        claimed_at: started_at,
    };
    claim::claim(store, &options.location, &options.backup_id, &run).await?;
    tracing::info!(
        backup_id = %options.backup_id,
        server_version = %server.version,
        databases = databases.len(),
        destination = %format!("{}/{}", store.location(), options.location.backup_prefix(&options.backup_id)),
        "backup starting"
    );

    let mut files = Vec::new();
    let result = dump_all(store, pg, options, &databases, cancel, &mut files).await;
    if let Err(e) = result {
        let keys: Vec<String> = files
            .iter()
            .map(|(o, _): &(StoredObject, ManifestFile)| o.key.clone())
            .collect();
        abandon(store, &options.location, &options.backup_id, &keys).await;
        return Err(e);
    }

    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        backup_id: options.backup_id.clone(),
        namespace: options.location.namespace().to_string(),
        cluster: options.location.cluster().to_string(),
        cluster_uid: options.cluster_uid.clone(),
        started_at,
        completed_at: jiff::Timestamp::now(),
        server_version: server.version,
        pg_dump_version,
        compression: options.compression,
        files: files.into_iter().map(|(_, f)| f).collect(),
        physical: None,
    };
    // Create-only: the claim makes a conflict here all but impossible, but a writer that
    // skipped it (an agent from before claims) must still not replace a complete backup.
    claim::create_manifest(store, &options.location, &manifest).await?;
    tracing::info!(key = %manifest_key, "manifest written, backup complete");
    Ok(manifest)
}

/// Removes what a failed run uploaded (without a manifest it is invisible anyway; removing it
/// saves space), then its claim, last and only ours: the id is free again for a later run.
pub(super) async fn abandon(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
    keys: &[String],
) {
    if let Err(cleanup) = store.delete_many(keys).await {
        tracing::warn!(error = %cleanup, "could not remove the partial backup's objects");
    }
    if let Err(cleanup) = claim::release(store, location, backup_id).await {
        tracing::warn!(error = %cleanup, "could not remove the backup's claim");
    }
}

/// The store answers and holds no backup `backup_id` yet.
pub(super) async fn ensure_new(
    store: &dyn ObjectStore,
    location: &ClusterLocation,
    backup_id: &str,
) -> Result<(), AgentError> {
    store.check().await?;
    let manifest_key = location.manifest_key(backup_id);
    match store.get(&manifest_key).await {
        Ok(_) => Err(AgentError::Usage(format!(
            "backup {backup_id} already exists at {}/{manifest_key}",
            store.location()
        ))),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn dump_all(
    store: &dyn ObjectStore,
    pg: &PgParams,
    options: &BackupOptions,
    databases: &[DatabaseInfo],
    cancel: &CancellationToken,
    files: &mut Vec<(StoredObject, ManifestFile)>,
) -> Result<(), AgentError> {
    let ext = options.compression.extension();
    let globals_name = layout::globals_file_name(ext);
    let args = vec!["--globals-only".to_string(), "--no-password".to_string()];
    let stored = dump_one(
        store,
        pg,
        options,
        "pg_dumpall",
        &args,
        &globals_name,
        cancel,
    )
    .await?;
    files.push((
        stored.clone(),
        ManifestFile {
            name: globals_name,
            kind: FileKind::Globals,
            database: None,
            database_owner: None,
            size_bytes: stored.size_bytes,
            sha256: stored.sha256,
            database_size_bytes: None,
            tables: None,
        },
    ));
    for db in databases {
        let name = layout::database_file_name(&db.name, ext);
        let snapshot = match options.record_counts {
            true => DumpSnapshot::open(pg, &db.name, options.lock_wait_timeout).await?,
            false => None,
        };
        let mut args = pg_dump_args(&db.name, options.lock_wait_timeout);
        if let Some(snapshot) = &snapshot {
            args.push(format!("--snapshot={}", snapshot.id));
        }
        let stored = dump_one(store, pg, options, "pg_dump", &args, &name, cancel).await;
        // Held open until pg_dump is done: the snapshot ends with its transaction.
        let tables = match snapshot {
            Some(snapshot) => {
                let tables = snapshot.tables.clone();
                snapshot.close().await;
                Some(tables)
            }
            None => None,
        };
        let stored = stored?;
        files.push((
            stored.clone(),
            ManifestFile {
                name,
                kind: FileKind::Database,
                database: Some(db.name.clone()),
                database_owner: Some(db.owner.clone()),
                size_bytes: stored.size_bytes,
                sha256: stored.sha256,
                database_size_bytes: Some(db.size_bytes),
                tables,
            },
        ));
    }
    Ok(())
}

async fn dump_one(
    store: &dyn ObjectStore,
    pg: &PgParams,
    options: &BackupOptions,
    tool: &str,
    args: &[String],
    file_name: &str,
    cancel: &CancellationToken,
) -> Result<StoredObject, AgentError> {
    let key = options.location.object_key(&options.backup_id, file_name);
    let mut dump = pg::spawn_tool(pg, tool, args, false, true)?;
    let stdout = dump.take_stdout()?;
    let reader = options
        .compression
        .encode(BufReader::with_capacity(256 * 1024, stdout));
    let finish = async move { dump.finish().await.map(|_| ()) };
    upload_stream(store, &key, reader, finish, cancel).await
}

/// pg_dump's arguments for one database.
fn pg_dump_args(database: &str, lock_wait_timeout: Duration) -> Vec<String> {
    vec![
        // -Z0: the agent compresses (zstd is faster and smaller than pg_dump's zlib).
        "--format=custom".to_string(),
        "--compress=0".to_string(),
        "--no-password".to_string(),
        // Milliseconds, the one format every server version accepts. Without it pg_dump waits
        // forever for a table an ALTER or LOCK holds, and the backup Job never ends by itself.
        format!(
            "--lock-wait-timeout={}",
            lock_wait_timeout.as_millis().max(1)
        ),
        format!("--dbname={}", pg::quote_conninfo(database)),
    ]
}

fn select_databases(
    all: Vec<DatabaseInfo>,
    wanted: &[String],
) -> Result<Vec<DatabaseInfo>, AgentError> {
    if wanted.is_empty() {
        return Ok(all);
    }
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|w| !all.iter().any(|d| &d.name == *w))
        .collect();
    if !missing.is_empty() {
        return Err(AgentError::Database(format!(
            "requested database(s) not found or not connectable: {missing:?}"
        )));
    }
    Ok(all
        .into_iter()
        .filter(|d| wanted.contains(&d.name))
        .collect())
}

/// pg_dump refuses servers newer than itself; say so before starting.
fn check_dump_version(pg_dump_version: &str, server_version_num: i32) -> Result<(), AgentError> {
    let server_major = u32::try_from(server_version_num / 10_000).unwrap_or(0);
    match pg::parse_major(pg_dump_version) {
        Some(dump_major) if dump_major >= server_major => Ok(()),
        Some(dump_major) => Err(AgentError::Other(format!(
            "pg_dump {dump_major} cannot dump a PostgreSQL {server_major} server: \
             use an agent image with PostgreSQL {server_major} client tools"
        ))),
        None => Err(AgentError::Other(format!(
            "cannot determine pg_dump's version from {pg_dump_version:?}"
        ))),
    }
}
