//! `base-backup`: a physical backup of the whole server (issue 27, docs/src/design/pitr.md §4).
//! `pg_basebackup -Ft -D -` streams one tar through compression into a multipart upload, with
//! no local copy; its WAL is not included (`-X none`): the archive holds it. PostgreSQL's own
//! `backup_manifest` travels inside the tar (for `pg_verifybackup` after a restore), and its
//! WAL range, read on the way, goes into our `manifest.json`, written last as for every backup,
//! and only once the archive holds every segment of that range: a backup marked complete
//! restores.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::BufReader;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::backup::{abandon, ensure_new};
use super::read_ahead::read_ahead;
use super::stream_upload::upload_stream;
use super::tar_scan::tar_scan;
use crate::compression::{Codec, Compression};
use crate::error::AgentError;
use crate::pg::{self, PgParams};
use backup_store::claim::{self, Claim};
use backup_store::layout::{self, ClusterLocation};
use backup_store::manifest::{FORMAT_VERSION, FileKind, Manifest, ManifestFile, PhysicalBackup};
use backup_store::store::ObjectStore;
use backup_store::wal::{WalArchive, WalError};
use backup_store::wal_range::{self, Lsn, WalSpan};

const BACKUP_MANIFEST: &str = "backup_manifest";
/// The last file of the data directory PostgreSQL sends: after it the server is in
/// `pg_backup_stop`, which waits for the archive before the `backup_manifest` follows.
const PG_CONTROL: &str = "global/pg_control";

pub struct BaseBackupOptions {
    pub location: ClusterLocation,
    pub backup_id: String,
    pub compression: Compression,
    /// The owning PostgreSQL's uid, recorded in the claim and the manifest.
    pub cluster_uid: Option<String>,
    /// Same for every retry of one run: lets a retried pod take over its claim.
    pub writer: Option<String>,
    /// How long the archive may take to receive the backup's WAL.
    pub wal_wait: Duration,
}

/// How often the archive is listed while waiting for the backup's WAL.
const ARCHIVE_POLL: Duration = Duration::from_secs(2);
const FIRST_POLL: Duration = Duration::from_millis(100);

pub async fn run_base_backup(
    store: &dyn ObjectStore,
    pg: &PgParams,
    options: &BaseBackupOptions,
    cancel: &CancellationToken,
) -> Result<Manifest, AgentError> {
    let started_at = jiff::Timestamp::now();
    layout::validate_backup_id(&options.backup_id)?;
    // Over replication: the role opens no ordinary session (issue 47).
    let server = pg::replication_facts(pg).await?;
    let (system, segment_size) = (server.system.clone(), server.segment_size);
    let tool_version = pg::tool_version(pg, "pg_basebackup").await?;
    ensure_new(store, &options.location, &options.backup_id).await?;
    let run = Claim {
        cluster_uid: options.cluster_uid.clone(),
        writer: options.writer.clone(),
        claimed_at: started_at,
    };
    claim::claim(store, &options.location, &options.backup_id, &run).await?;

    let name = format!("base.tar{}", options.compression.extension());
    let key = options.location.object_key(&options.backup_id, &name);
    let label = format!("--label=tusk {}", options.backup_id);
    let args: Vec<String> = [
        "--pgdata=-",
        "--format=tar",
        "--wal-method=none",
        "--checkpoint=fast",
        // CRC32C, pg_basebackup's default: each file is checked at restore against accidental
        // damage; the stored object as a whole has our SHA-256. SHA-256 here cost the server
        // about a third of the backup's time (scripts/bench-base-backup.sh).
        "--manifest-checksums=CRC32C",
        "--no-password",
        label.as_str(),
    ]
    .map(str::to_owned)
    .to_vec();
    let uploaded = async {
        let mut tool = pg::spawn_tool(pg, "pg_basebackup", &args, false, true)?;
        let stdout = tool.take_stdout()?;
        let stopping = Arc::new(Notify::new());
        let mark = Some((PG_CONTROL, stopping.clone()));
        let (scan, kept) = tar_scan(read_ahead(stdout), &[BACKUP_MANIFEST], mark);
        let reader = options
            .compression
            .encode(BufReader::with_capacity(256 * 1024, scan));
        let finish = async move { tool.finish().await.map(|_| ()) };
        // pg_basebackup without WAL leaves the archive's wait to the server, which waits in
        // pg_backup_stop for as long as archiving fails: bounded here like the wait after it
        // (pg_basebackup is killed when the upload is dropped).
        let stored = tokio::select! {
            stored = upload_stream(store, &key, reader, finish, cancel) => stored?,
            waited = stop_waits_for_the_archive(&stopping, options.wal_wait) => return Err(waited),
        };
        let kept = kept.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let manifest = kept
            .into_iter()
            .find(|(name, _)| name == BACKUP_MANIFEST)
            .ok_or_else(|| AgentError::Other("pg_basebackup sent no backup_manifest".into()))?;
        let (mut physical, spans) = wal_range(&manifest.1, system)?;
        physical.wal_segment_size = Some(segment_size);
        await_archived(store, options, &physical, &spans, segment_size, cancel).await?;
        Ok::<_, AgentError>((stored, physical))
    }
    .await;
    let (stored, physical) = match uploaded {
        Ok(done) => done,
        Err(e) => {
            let keys = std::slice::from_ref(&key);
            abandon(store, &options.location, &options.backup_id, keys).await;
            return Err(e);
        }
    };
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        backup_id: options.backup_id.clone(),
        namespace: options.location.namespace().to_owned(),
        cluster: options.location.cluster().to_owned(),
        cluster_uid: options.cluster_uid.clone(),
        started_at,
        completed_at: jiff::Timestamp::now(),
        server_version: server.version,
        pg_dump_version: tool_version,
        compression: options.compression,
        files: vec![ManifestFile {
            name,
            kind: FileKind::Base,
            database: None,
            database_owner: None,
            size_bytes: stored.size_bytes,
            sha256: stored.sha256,
            database_size_bytes: None,
            tables: None,
        }],
        physical: Some(physical),
    };
    claim::create_manifest(store, &options.location, &manifest).await?;
    tracing::info!(backup_id = %manifest.backup_id, "base backup complete");
    Ok(manifest)
}

/// Waits until the archive holds every segment of `spans`, listing it after [`FIRST_POLL`], then
/// twice as long each time up to [`ARCHIVE_POLL`], for at most the options' `wal_wait`. From a primary the last segment is
/// switched out at the backup's stop; from a standby it comes with the primary's next switch
/// (`archive_timeout`).
async fn await_archived(
    store: &dyn ObjectStore,
    options: &BaseBackupOptions,
    physical: &PhysicalBackup,
    spans: &[WalSpan],
    segment_size: u64,
    cancel: &CancellationToken,
) -> Result<(), AgentError> {
    let system = physical.system_identifier.parse().map_err(|_| {
        AgentError::Other(format!(
            "system identifier {:?}",
            physical.system_identifier
        ))
    })?;
    let archive = WalArchive::new(&options.location, system);
    let mut needed = Vec::new();
    for span in spans {
        needed.extend(span.segments(segment_size)?);
    }
    let started = Instant::now();
    // From a primary the last segment is usually archived within a second: look again soon,
    // then every ARCHIVE_POLL.
    let mut poll = FIRST_POLL;
    loop {
        needed = wal_range::missing(store, &archive, &needed).await?;
        let Some(first) = needed.first() else {
            return Ok(());
        };
        if started.elapsed() >= options.wal_wait {
            return Err(AgentError::WalNotArchived {
                segment: first.as_str().to_owned(),
                waited_seconds: started.elapsed().as_secs(),
            });
        }
        tracing::info!(
            segment = first.as_str(),
            missing = needed.len(),
            "waiting for the backup's WAL in the archive"
        );
        tokio::select! {
            () = cancel.cancelled() => return Err(AgentError::Interrupted),
            () = tokio::time::sleep(poll) => {}
        }
        poll = (poll * 2).min(ARCHIVE_POLL);
    }
}

/// Resolves `wal_wait` after the data directory's last file passed (`stopping`): the server
/// is still in `pg_backup_stop`, waiting for the archive.
async fn stop_waits_for_the_archive(stopping: &Notify, wal_wait: Duration) -> AgentError {
    stopping.notified().await;
    let started = Instant::now();
    tokio::time::sleep(wal_wait).await;
    AgentError::WalNotArchivedAtStop {
        waited_seconds: started.elapsed().as_secs(),
    }
}

/// The WAL range of PostgreSQL's `backup_manifest`: from the first range's start to the last
/// one's end (a backup taken from a standby can span a timeline switch), and each range.
pub fn wal_range(
    backup_manifest: &[u8],
    system: String,
) -> Result<(PhysicalBackup, Vec<WalSpan>), AgentError> {
    let invalid = |why: &str| AgentError::Other(format!("the backup_manifest {why}"));
    let parsed: serde_json::Value = serde_json::from_slice(backup_manifest)
        .map_err(|e| invalid(&format!("is not JSON: {e}")))?;
    let ranges = parsed["WAL-Ranges"]
        .as_array()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| invalid("has no WAL-Ranges"))?;
    let field = |range: &serde_json::Value, name: &str| {
        range[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(&format!("has no {name}")))
    };
    let mut spans = Vec::with_capacity(ranges.len());
    for range in ranges {
        let timeline = range["Timeline"]
            .as_u64()
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| invalid("has a range without a Timeline"))?;
        spans.push(WalSpan {
            timeline,
            start: Lsn::parse(&field(range, "Start-LSN")?).map_err(WalError::from)?,
            end: Lsn::parse(&field(range, "End-LSN")?).map_err(WalError::from)?,
        });
    }
    let (first, last) = (&ranges[0], &ranges[ranges.len() - 1]);
    let physical = PhysicalBackup {
        system_identifier: system,
        timeline: spans[0].timeline,
        start_lsn: field(first, "Start-LSN")?,
        stop_lsn: field(last, "End-LSN")?,
        wal_segment_size: None,
    };
    Ok((physical, spans))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wal_range_spans_every_timeline_of_the_backup() {
        let manifest = br#"{"PostgreSQL-Backup-Manifest-Version": 1, "Files": [],
            "WAL-Ranges": [
                {"Timeline": 1, "Start-LSN": "0/2000028", "End-LSN": "0/3000000"},
                {"Timeline": 2, "Start-LSN": "0/3000000", "End-LSN": "0/3000100"}]}"#;
        let (range, spans) = wal_range(manifest, "7".into()).unwrap();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[1].timeline, 2);
        assert_eq!(spans[1].end, Lsn::parse("0/3000100").unwrap());
        assert_eq!(
            range,
            PhysicalBackup {
                system_identifier: "7".into(),
                timeline: 1,
                start_lsn: "0/2000028".into(),
                stop_lsn: "0/3000100".into(),
                wal_segment_size: None,
            }
        );
        assert!(wal_range(br#"{"WAL-Ranges": []}"#, "7".into()).is_err());
        assert!(wal_range(b"not json", "7".into()).is_err());
    }
}
