//! Turns parsed arguments into library calls, and results into a one-line JSON summary on
//! stdout plus an exit code.

use std::time::Instant;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use backup_agent::error::{AgentError, exit_code};
use backup_agent::pipeline::{backup, restore, verify};
use backup_agent::termination;
use backup_store::Owner;
use backup_store::duration::parse_duration;
use backup_store::retention::Policy;
use backup_store::{catalog, prune};

use crate::cli::Command;
use crate::pg_args::pg_params;
use crate::store_args::open_store;
use crate::summary::peak_rss_bytes;

pub async fn run(command: Command) -> i32 {
    let name = match &command {
        Command::Backup(_) => "backup",
        Command::Restore(_) => "restore",
        Command::List(_) => "list",
        Command::Verify(_) => "verify",
        Command::VerifyRestore(_) => "verify-restore",
        Command::Delete(_) => "delete",
        Command::Prune(_) => "prune",
        Command::WalPush(_) => "wal-push",
        Command::WalFetch(_) => "wal-fetch",
        Command::BaseBackup(_) => "base-backup",
        Command::BaseRestore(_) => "base-restore",
        Command::RestorePoint(_) => "restore-point",
    };
    let cancel = CancellationToken::new();
    tokio::spawn(cancel_on_signal(cancel.clone()));
    let started = Instant::now();
    let result = match command {
        // Its own report and exit codes (see `verify_restore_cmd`).
        Command::VerifyRestore(args) => {
            return crate::verify_restore_cmd::run(args, &cancel, started).await;
        }
        other => dispatch(other, &cancel).await,
    };
    let seconds = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    let (code, mut summary) = match result {
        Ok(details) => (
            exit_code::OK,
            json!({"command": name, "status": "ok", "details": details}),
        ),
        Err(e) => {
            tracing::error!(error = %e, "{name} failed");
            termination::record(&e.to_string());
            let code = match (name, &e) {
                ("wal-fetch", AgentError::NotArchived(_)) => e.exit_code(),
                ("wal-fetch", _) => exit_code::RECOVERY_MUST_STOP,
                _ => e.exit_code(),
            };
            (
                code,
                json!({"command": name, "status": "error", "exitCode": code, "error": e.to_string()}),
            )
        }
    };
    summary["durationSeconds"] = json!(seconds);
    if let Some(peak) = peak_rss_bytes() {
        summary["peakRssBytes"] = json!(peak);
    }
    println!("{summary}");
    code
}

/// SIGTERM (Kubernetes stopping the pod) and SIGINT cancel the work so uploads get aborted.
async fn cancel_on_signal(cancel: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::warn!("signal received, cancelling");
    cancel.cancel();
}

async fn dispatch(command: Command, cancel: &CancellationToken) -> Result<Value, AgentError> {
    match command {
        Command::Backup(args) => {
            let (store, location) = open_store(&args.store).await?;
            let pg = pg_params(&args.pg)?;
            let options = backup::BackupOptions {
                location: location.clone(),
                backup_id: args.write.backup_id(),
                compression: args.write.compression,
                databases: non_empty(args.databases),
                lock_wait_timeout: parse_duration(&args.lock_wait_timeout)
                    .map_err(|e| AgentError::Usage(format!("--lock-wait-timeout: {e}")))?,
                cluster_uid: args.write.cluster_uid(),
                writer: args.write.writer(),
                record_counts: args.record_counts,
            };
            let manifest = backup::run_backup(store.as_ref(), &pg, &options, cancel).await?;
            Ok(json!({
                "backupId": manifest.backup_id,
                "location": format!("{}/{}", store.location(), location.backup_prefix(&manifest.backup_id)),
                "sizeBytes": manifest.total_size_bytes(),
                "files": manifest.files.len(),
                "serverVersion": manifest.server_version,
                "completedAt": manifest.completed_at,
            }))
        }
        Command::Restore(args) => {
            let (store, location) = open_store(&args.store).await?;
            let pg = pg_params(&args.pg)?;
            let options = restore::RestoreOptions {
                location,
                backup_id: args.backup_id,
                force: args.force,
                work_dir: args.work_dir,
                preserve_roles: non_empty(args.preserve_roles),
            };
            let manifest = restore::run_restore(store.as_ref(), &pg, &options, cancel).await?;
            let databases: Vec<&str> = manifest
                .files
                .iter()
                .filter_map(|f| f.database.as_deref())
                .collect();
            Ok(
                json!({"backupId": manifest.backup_id, "databases": databases, "sizeBytes": manifest.total_size_bytes()}),
            )
        }
        Command::List(args) => {
            let (store, location) = open_store(&args.store).await?;
            let catalog = catalog::load(store.as_ref(), &location).await?;
            let backups: Vec<Value> = catalog
                .backups
                .iter()
                .map(|b| {
                    json!({
                        "backupId": b.manifest.backup_id,
                        "startedAt": b.manifest.started_at,
                        "completedAt": b.manifest.completed_at,
                        "sizeBytes": b.manifest.total_size_bytes(),
                        "serverVersion": b.manifest.server_version,
                        "compression": b.manifest.compression,
                        "databases": b.manifest.files.iter().filter_map(|f| f.database.clone()).collect::<Vec<_>>(),
                    })
                })
                .collect();
            Ok(json!({"backups": backups, "incomplete": catalog.incomplete}))
        }
        Command::Verify(args) => {
            let (store, location) = open_store(&args.store).await?;
            let manifest =
                catalog::resolve(store.as_ref(), &location, &args.backup_id, None).await?;
            verify::verify_backup(store.as_ref(), &location, &manifest, cancel).await?;
            Ok(
                json!({"backupId": manifest.backup_id, "files": manifest.files.len(), "sizeBytes": manifest.total_size_bytes()}),
            )
        }
        Command::VerifyRestore(_) => Err(AgentError::Other(
            "verify-restore is run by verify_restore_cmd".into(),
        )),
        Command::Delete(args) => {
            let (store, location) = open_store(&args.store).await?;
            let objects =
                catalog::delete_backup(store.as_ref(), &location, &args.backup_id).await?;
            Ok(json!({"backupId": args.backup_id, "objectsDeleted": objects}))
        }
        Command::WalPush(args) => crate::wal_cmd::push(args).await,
        Command::WalFetch(args) => crate::wal_cmd::fetch(args).await,
        Command::BaseBackup(args) => crate::base_cmd::backup(args, cancel).await,
        Command::BaseRestore(args) => crate::base_cmd::restore(args).await,
        Command::RestorePoint(args) => crate::base_cmd::restore_point(args).await,
        Command::Prune(args) => {
            let duration = |flag: &Option<String>| {
                (flag.as_deref().map(parse_duration).transpose())
                    .map_err(|e| AgentError::Usage(e.to_string()))
            };
            let (max_age, recovery_window) =
                (duration(&args.max_age)?, duration(&args.recovery_window)?);
            if args.keep.is_none() && max_age.is_none() && recovery_window.is_none() {
                return Err(AgentError::Usage(
                    "prune needs --keep, --max-age and/or --recovery-window".into(),
                ));
            }
            let (store, location) = open_store(&args.store).await?;
            let policy = Policy {
                keep: args.keep,
                max_age,
                recovery_window,
            };
            let owner = args
                .protect
                .into_iter()
                .fold(Owner::new(args.cluster_uid.as_deref()), Owner::protecting);
            let now = jiff::Timestamp::now();
            let report = prune::prune(store.as_ref(), &location, &owner, policy, now).await?;
            serde_json::to_value(report)
                .map_err(|e| AgentError::Other(format!("serializing report: {e}")))
        }
    }
}

/// Drops empty entries of comma-separated env lists (an empty variable, a trailing comma).
fn non_empty(values: Vec<String>) -> Vec<String> {
    values.into_iter().filter(|v| !v.is_empty()).collect()
}
