//! Optimizer statistics after an in-place upgrade: `pg_upgrade` before 18 carries none, and
//! until ANALYZE runs the planner plans every query on a freshly upgraded database as if its
//! tables were empty. The upgrade leaves a mark beside PGDATA; the primary's manager then
//! analyzes every database once, in the background while it serves, in the stages `vacuumdb
//! --analyze-in-stages` uses (statistics targets 1, 10, then the default: usable plans within
//! seconds, full statistics after), and removes the mark. A failure is retried at the next
//! round; the mark is on the volume, so a restart does not forget it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::context::Context;
use crate::error::Error;

/// One round at a time in this process.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// The stages' `default_statistics_target`; `None` is the server's own setting.
const STAGES: [Option<u32>; 3] = [Some(1), Some(10), None];

/// `<pgdata>.tusk-analyze`: beside PGDATA, so no clone or base backup carries it to a replica.
pub fn marker(pgdata: &Path) -> PathBuf {
    let mut path = pgdata.as_os_str().to_owned();
    path.push(".tusk-analyze");
    PathBuf::from(path)
}

/// Starts the analysis in the background when an upgrade asked for it and none runs. Called on
/// the primary only.
pub fn start_if_pending(ctx: &Arc<Context>) {
    let mark = marker(ctx.pgdata());
    if !mark.exists() || RUNNING.swap(true, Ordering::AcqRel) {
        return;
    }
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        match analyze_everything(&ctx).await {
            Ok(databases) => match std::fs::remove_file(&mark) {
                Ok(()) => tracing::info!(
                    databases,
                    seconds = started.elapsed().as_secs(),
                    "statistics gathered after the in-place upgrade"
                ),
                Err(e) => tracing::warn!(error = %e, "removing the statistics mark"),
            },
            Err(e) => tracing::warn!(error = %e, "gathering statistics after the upgrade"),
        }
        RUNNING.store(false, Ordering::Release);
    });
}

async fn analyze_everything(ctx: &Context) -> Result<usize, Error> {
    let client = crate::roles::silent_session(ctx).await?;
    let rows = client
        .query(
            "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname",
            &[],
        )
        .await
        .map_err(Error::sql("listing the databases to analyze"))?;
    let databases: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    for stage in STAGES {
        let target = match stage {
            Some(target) => format!("SET default_statistics_target = {target}; "),
            None => String::new(),
        };
        for database in &databases {
            let session = crate::sql::connect(ctx, database).await?;
            session
                .batch_execute(&format!("SET vacuum_cost_delay = 0; {target}ANALYZE"))
                .await
                .map_err(Error::sql(format!("ANALYZE in database {database:?}")))?;
        }
    }
    Ok(databases.len())
}
