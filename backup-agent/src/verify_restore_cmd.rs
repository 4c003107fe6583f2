//! `verify-restore`'s output contract: the report as the summary line's `details` on stdout
//! and alone in the termination-message file (what the operator reads), and an exit code that
//! tells a bad backup (7) from a verification that could not run (the error's own code).

use std::time::Instant;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use backup_agent::error::{AgentError, exit_code};
use backup_agent::pipeline::verify_restore::{self, Phase, Verification, VerifyRestoreOptions};
use backup_agent::termination;
use backup_store::duration::parse_duration;

use crate::cli::VerifyRestoreArgs;
use crate::store_args::open_store;
use crate::summary::peak_rss_bytes;

pub async fn run(args: VerifyRestoreArgs, cancel: &CancellationToken, started: Instant) -> i32 {
    let Verification { report, error } = match prepare(&args).await {
        Ok((store, options)) => {
            verify_restore::run_verify_restore(store.as_ref(), &options, cancel).await
        }
        Err(e) => failed_to_start(e, &args.backup_id),
    };
    let (code, status) = match (&error, report.phase) {
        (Some(e), _) => (e.exit_code(), "error"),
        (None, Phase::Failed) => (exit_code::VERIFICATION_FAILED, "failed"),
        (None, _) => (exit_code::OK, "ok"),
    };
    match &error {
        Some(e) => tracing::error!(error = %e, "verify-restore could not run"),
        None => {
            tracing::info!(phase = ?report.phase, message = %report.message, "verify-restore finished")
        }
    }
    termination::record_json(&report.to_termination_json());
    let mut summary =
        json!({"command": "verify-restore", "status": status, "exitCode": code, "details": report});
    if let Some(e) = &error {
        summary["error"] = json!(e.to_string());
    }
    summary["durationSeconds"] = json!((started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
    if let Some(peak) = peak_rss_bytes() {
        summary["peakRssBytes"] = json!(peak);
    }
    println!("{summary}");
    code
}

type Prepared = (
    Box<dyn backup_store::store::ObjectStore>,
    VerifyRestoreOptions,
);

async fn prepare(args: &VerifyRestoreArgs) -> Result<Prepared, AgentError> {
    let startup_timeout = parse_duration(&args.startup_timeout)
        .map_err(|e| AgentError::Usage(format!("--startup-timeout: {e}")))?;
    let (store, location) = open_store(&args.store).await?;
    let options = VerifyRestoreOptions {
        location,
        backup_id: args.backup_id.clone(),
        scratch_dir: args.scratch_dir.clone(),
        bin_dir: args.pg_bin_dir.clone(),
        startup_timeout,
        store_env: args.store.flags.to_env(),
    };
    Ok((store, options))
}

/// A report for a verification that stopped before it started (bad arguments, no store).
fn failed_to_start(error: AgentError, backup_id: &str) -> Verification {
    let now = jiff::Timestamp::now();
    let mut checks = verify_restore::report::Checks::default();
    checks.skip_rest(&format!("the verification could not run: {error}"));
    let report = verify_restore::Report::new(
        Some(backup_id.to_string()),
        checks,
        Default::default(),
        Some(error.to_string()),
        now,
        now,
    );
    Verification {
        report,
        error: Some(error),
    }
}
