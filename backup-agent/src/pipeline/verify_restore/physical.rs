//! `verify-restore` of a physical backup (issue 28): the base backup restored as a real restore
//! does it (size and sha256 of `base.tar`, then `pg_verifybackup` against PostgreSQL's own
//! `backup_manifest`), the archive walked from the backup's start (every segment and history
//! file present, `backup_store::continuity`), then a throwaway server recovers from the archive
//! to its end and is checked: recovery got to the last archived segment, every database is
//! there and `pg_amcheck` finds nothing.
//!
//! Counts: a physical backup records none; the primary writes a restore point after each base
//! backup with every table's exact count there (`restore-point`). Recovery stops at the newest
//! such point after the backup whose segment is archived, and compares every database and
//! count. Without one, it replays to the end of the archive and `counts` is `skipped`.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::VerifyRestoreOptions;
use super::checks;
use super::report::{Checks, Outcome, Totals, compare_counts};
use super::scratch::ScratchServer;
use crate::error::AgentError;
use crate::pg::counts;
use crate::pipeline::base_restore::{BaseRestoreOptions, run_base_restore};
use backup_store::continuity;
use backup_store::lsn::Lsn;
use backup_store::manifest::{Manifest, PhysicalBackup};
use backup_store::points;
use backup_store::store::ObjectStore;
use backup_store::wal::WalArchive;

/// How long recovery may replay before the verification gives up (the Job's deadline is the
/// real bound).
const REPLAY_LIMIT: Duration = Duration::from_secs(6 * 3600);

pub async fn verify(
    store: &dyn ObjectStore,
    options: &VerifyRestoreOptions,
    manifest: &Manifest,
    cancel: &CancellationToken,
    checks: &mut Checks,
    totals: &mut Totals,
) -> Result<(), AgentError> {
    let physical = manifest.physical.as_ref().ok_or_else(|| {
        AgentError::Integrity(format!("{} records no WAL position", manifest.backup_id))
    })?;
    let mut server =
        ScratchServer::create(options.scratch_dir.as_deref(), options.bin_dir.clone())?;
    let outcome = tokio::select! {
        outcome = restore_and_check(store, options, manifest, physical, &mut server, checks, totals) => outcome,
        () = cancel.cancelled() => Err(AgentError::Interrupted),
    };
    server.stop().await;
    outcome
}

async fn restore_and_check(
    store: &dyn ObjectStore,
    options: &VerifyRestoreOptions,
    manifest: &Manifest,
    physical: &PhysicalBackup,
    server: &mut ScratchServer,
    checks: &mut Checks,
    totals: &mut Totals,
) -> Result<(), AgentError> {
    let restore = BaseRestoreOptions {
        location: options.location.clone(),
        backup_id: manifest.backup_id.clone(),
        pgdata: server.data_dir(),
        bin_dir: options.bin_dir.clone(),
        before: None,
    };
    match run_base_restore(store, &restore).await {
        Ok(_) => {
            checks.pass(
                "checksums",
                "base.tar: size and sha256 equal the manifest's; pg_verifybackup: every file \
                 equals PostgreSQL's backup_manifest",
            );
            checks.pass(
                "restore",
                "the base backup unpacked into a new data directory",
            );
        }
        Err(e @ (AgentError::Checksum(_) | AgentError::Integrity(_))) => {
            checks.fail("checksums", e.to_string());
            checks.skip_rest("the base backup's files are not intact");
            return Ok(());
        }
        Err(e) => return Err(e),
    }

    // The archive from the backup on, before any replay: a hole is named as such.
    let system: u64 = physical.system_identifier.parse().map_err(|_| {
        AgentError::Integrity(format!(
            "{} records the system identifier {:?}",
            manifest.backup_id, physical.system_identifier
        ))
    })?;
    let start = Lsn::parse(&physical.start_lsn)
        .map_err(|e| AgentError::Integrity(format!("{}: {e}", manifest.backup_id)))?;
    let now = jiff::Timestamp::now().as_second();
    let from = Some((physical.timeline, start));
    let walked = continuity::check(
        store,
        &options.location,
        system,
        &BTreeSet::new(),
        now,
        from,
    )
    .await?;
    if walked.unexplained() + walked.released_count > 0 {
        checks.fail("wal", hole(&walked));
        checks.skip_rest("the archive cannot be replayed to its end");
        return Ok(());
    }

    let size = segment_size(physical);
    let last = walked.last_segment.as_deref();
    let last_start = last.and_then(|l| Lsn::of_segment(l, size));
    // The newest point the primary wrote after this backup was consistent, once the archive
    // holds its segment: recovery stops there, and the counts are compared.
    let stop = Lsn::parse(&physical.stop_lsn).unwrap_or(start);
    let point = points::newest(store, &WalArchive::new(&options.location, system))
        .await?
        .filter(|p| {
            p.lsn().is_some_and(|lsn| {
                lsn >= stop && last_start.is_some_and(|l| lsn.0 < l.0.saturating_add(size))
            })
        });

    prepare_recovery(&server.data_dir())?;
    let agent = std::env::current_exe()
        .map_err(|e| AgentError::io("finding the agent for the restore command", e))?;
    let mut env = options.store_env.clone();
    env.push(("TUSK_NAMESPACE".into(), options.location.namespace().into()));
    env.push(("TUSK_CLUSTER".into(), options.location.cluster().into()));
    // wal-fetch reads the system identifier from PGDATA: this scratch server's, never the one
    // the environment names (the stock postgres image's, in the Job's pod).
    env.push(("PGDATA".into(), server.data_dir().display().to_string()));
    let mut settings = vec![
        format!("restore_command='{}' wal-fetch %f %p", agent.display()),
        "recovery_target_timeline=latest".into(),
        "recovery_target_action=promote".into(),
        // No connection before recovery ends; and no check of the primary's hot-standby
        // settings against this server's defaults.
        "hot_standby=off".into(),
    ];
    if let Some(point) = &point {
        settings.push(format!("recovery_target_name={}", point.name));
    }
    server.start_on_data(&settings, &env)?;
    let replay = Instant::now();
    if let Err(log) = wait_promoted(server).await {
        checks.fail(
            "wal",
            format!("recovery from the archive did not finish: {log}"),
        );
        checks.skip_rest("the restored server did not recover");
        return Ok(());
    }
    let pg = server.params(Duration::from_secs(10));
    let ended = recovery_end(&pg).await?;
    let short = match (&point, ended) {
        (Some(point), Some(end)) => point
            .lsn()
            .filter(|lsn| end < *lsn)
            .map(|lsn| format!("the restore point {} ({lsn})", point.name)),
        (None, Some(end)) => last_start.filter(|l| end < *l).map(|l| {
            format!(
                "the archive's last segment {} ({l})",
                last.unwrap_or_default()
            )
        }),
        _ => None,
    };
    match (ended, short) {
        (Some(end), Some(goal)) => {
            checks.fail("wal", format!("recovery ended at {end}, before {goal}"));
        }
        (end, _) => checks.pass(
            "wal",
            format!(
                "{} segments on timeline(s) {:?} from {} to {} present; recovery replayed {} \
                 to {} in {:.1} s and promoted",
                walked.segments,
                walked.timelines,
                walked
                    .first_segment
                    .as_deref()
                    .unwrap_or("the backup's start"),
                last.unwrap_or("the backup's end"),
                point.as_ref().map_or_else(
                    || "the whole archive".to_owned(),
                    |p| format!("up to the restore point {}", p.name)
                ),
                end.map_or_else(|| "its end".to_owned(), |e| e.to_string()),
                replay.elapsed().as_secs_f64()
            ),
        ),
    }

    let present = pg.database_names().await?;
    let wanted: Vec<&String> = point.iter().flat_map(|p| p.databases.keys()).collect();
    let absent: Vec<&&String> = wanted.iter().filter(|d| !present.contains(d)).collect();
    match absent.is_empty() {
        true => checks.pass(
            "databases",
            format!(
                "{} databases recovered and accepting connections: {present:?}",
                present.len()
            ),
        ),
        false => checks.fail(
            "databases",
            format!("databases at the restore point missing after the recovery: {absent:?}"),
        ),
    }
    totals.databases = present.len() as u64;
    let (outcome, message) = checks::amcheck(&pg).await?;
    checks.set("amcheck", outcome, message);
    let mut restored = Vec::new();
    for database in &present {
        let client = pg.connect(database).await?;
        let tables = counts::count_tables(&client, database).await?;
        totals.tables += tables.len() as u64;
        totals.rows += tables.iter().map(|t| t.rows).sum::<u64>();
        restored.push((database.clone(), tables));
    }
    let (outcome, message) = match &point {
        Some(point) => {
            let recorded: Vec<_> = (point.databases.iter())
                .map(|(d, t)| (d.clone(), Some(t.clone())))
                .collect();
            let (outcome, message) = compare_counts(&recorded, &restored);
            (
                outcome,
                format!("at the restore point {}: {message}", point.name),
            )
        }
        None => (
            Outcome::Skipped,
            format!(
                "{} tables, {} rows counted; no restore point with counts after this backup \
                 (the primary writes one after each base backup)",
                totals.tables, totals.rows
            ),
        ),
    };
    checks.set("counts", outcome, message);
    Ok(())
}

fn segment_size(physical: &PhysicalBackup) -> u64 {
    physical
        .wal_segment_size
        .unwrap_or(continuity::DEFAULT_SEGMENT_SIZE)
}

/// What the walk found missing, for the `wal` check.
fn hole(walked: &continuity::ArchiveContinuity) -> String {
    let mut parts = Vec::new();
    if walked.missing_count > 0 {
        parts.push(format!(
            "{} segment(s) missing from the archive: {}",
            walked.missing_count,
            walked.missing.join(", ")
        ));
    }
    if walked.released_count > 0 {
        parts.push(format!(
            "{} segment(s) released unarchived by the disk policy",
            walked.released_count
        ));
    }
    for timeline in &walked.missing_history {
        parts.push(format!("no history file for timeline {timeline}"));
    }
    parts.extend(walked.foreign.iter().cloned());
    parts.join("; ")
}

/// The restored directory made this server's: the cluster's configuration (its TLS files,
/// libraries and includes are not here) and any signal file replaced by a recovery signal; a
/// socket-only server that trusts its own user (the socket is 0700 in a 0700 directory).
fn prepare_recovery(data: &Path) -> Result<(), AgentError> {
    let write = |name: &str, contents: &str| {
        std::fs::write(data.join(name), contents)
            .map_err(|e| AgentError::io(format!("writing {name} of the restored server"), e))
    };
    write("postgresql.conf", "")?;
    write("postgresql.auto.conf", "")?;
    write("pg_hba.conf", "local all all trust\n")?;
    write("pg_ident.conf", "")?;
    let _ = std::fs::remove_file(data.join("standby.signal"));
    write("recovery.signal", "")
}

/// Waits until the server accepts connections (only after promotion, `hot_standby` off); the
/// end of its log when it stops first or takes too long.
async fn wait_promoted(server: &mut ScratchServer) -> Result<(), String> {
    let probe = server.params(Duration::from_secs(5));
    let deadline = Instant::now() + REPLAY_LIMIT;
    loop {
        if !server.is_running() {
            return Err(server.log_tail());
        }
        if let Ok(client) = probe.connect("postgres").await {
            let recovering = client.query_one("SELECT pg_is_in_recovery()", &[]).await;
            if recovering.is_ok_and(|row| !row.get::<_, bool>(0)) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "still replaying after {REPLAY_LIMIT:?}: {}",
                server.log_tail()
            ));
        }
        // Recovery gives no notification to wait on; its socket is polled.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Where recovery ended: the switch point the promotion wrote in its timeline's history file.
async fn recovery_end(pg: &crate::pg::PgParams) -> Result<Option<Lsn>, AgentError> {
    let client = pg.connect("postgres").await?;
    let row = client
        .query_one(
            "SELECT pg_read_file('pg_wal/' || lpad(upper(to_hex(timeline_id)), 8, '0') || \
             '.history') FROM pg_control_checkpoint()",
            &[],
        )
        .await
        .map_err(|e| AgentError::Database(format!("reading the new timeline's history: {e}")))?;
    let history: String = row.get(0);
    let last = history.lines().rfind(|l| !l.trim().is_empty());
    Ok(last
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|lsn| Lsn::parse(lsn).ok()))
}
