//! The scale benchmark (`tusk-scale`, run by scripts/bench-scale.sh): N clusters applied at
//! once to the local control plane (kwok plays the nodes), the operator measured from outside —
//! its process in /proc, its requests in the API server's audit log, what exists through
//! watches — through convergence, a rest window, a restart at rest, and deleting everything.

pub mod census;
pub mod fleet;
pub mod process;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;

use crate::audit::{self, Requests};
use crate::platform::Local;
use crate::{Context, Result, fail, metrics, say};
use census::Census;
use fleet::Fleet;
use report::Report;

/// Children per cluster, in the census's order: a StatefulSet, Services rw and hl, Secrets
/// superuser and app, a ConfigMap.
const PER_CLUSTER: [usize; 4] = [1, 2, 2, 1];
/// How long after a restart its resident memory is read.
const AFTER_RESTART: Duration = Duration::from_secs(90);

/// One benchmark run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fleet: Fleet,
    /// How long the operator is watched at rest.
    pub rest: Duration,
    /// The longest any phase may take before the run fails.
    pub timeout: Duration,
}

/// The local control plane and operator (e2e/local/up.sh and operator.sh) in `dir`.
pub struct Stand {
    pub client: Client,
    pub operator: Local,
    pub dir: PathBuf,
}

impl Stand {
    fn audit_log(&self) -> PathBuf {
        self.dir.join("logs/audit.log")
    }

    fn pid(&self) -> Result<u32> {
        let file = self.dir.join("pids/operator.pid");
        let text = std::fs::read_to_string(&file).context(file.display())?;
        text.trim()
            .parse()
            .context(format!("{}: {text:?}", file.display()))
    }

    fn usage(&self) -> Result<process::Usage> {
        process::usage(self.pid()?)
    }

    fn requests_since(&self, mark: u64) -> Result<Requests> {
        audit::requests_since(&self.audit_log(), mark)
    }

    fn mark(&self) -> Result<u64> {
        audit::mark(&self.audit_log())
    }
}

/// Runs `plan` on `stand`; every cluster it applies is deleted again at the end.
pub async fn run(stand: &Stand, plan: &Plan) -> Result<Report> {
    let (n, timeout) = (plan.fleet.clusters, plan.timeout);
    plan.fleet.prepare(&stand.client).await?;
    let census = Census::start(&stand.client).await?;
    if census.look().clusters > 0 {
        fail!(
            "the control plane already has PostgreSQLs: {}",
            census.look()
        );
    }

    let mark = stand.mark()?;
    let start = Instant::now();
    plan.fleet.apply(&stand.client).await?;
    say(format!(
        "applied {n} clusters in {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    let children_created = census
        .until("every cluster's children", start, timeout, |c| {
            c.children_of(n, &PER_CLUSTER)
        })
        .await?;
    say(format!("children of all: {}", census.look()));
    let all_ready = census
        .until("every cluster Ready", start, timeout, |c| c.ready >= n)
        .await?;
    let converge_requests = stand.requests_since(mark)?;
    let converged = stand.usage()?;

    say(format!("at rest for {:?}", plan.rest));
    let mark = stand.mark()?;
    // The rest window is the measurement itself, not a wait for something to happen.
    tokio::time::sleep(plan.rest).await;
    let rest_requests = stand.requests_since(mark)?;
    let settled = stand.usage()?;

    let (restart_settled, restart_requests) = restart(stand, n, timeout).await?;
    // Resident memory once the restart's burst (every cache listed at once) is over.
    tokio::time::sleep(AFTER_RESTART).await;
    let restarted = stand.usage()?;

    let start = Instant::now();
    plan.fleet.delete(&stand.client).await?;
    let clusters_deleted = census
        .until("every PostgreSQL gone", start, timeout, |c| c.clusters == 0)
        .await?;
    let all_deleted = census
        .until("every cluster and child gone", start, timeout, |c| {
            c.clusters == 0 && c.no_children()
        })
        .await?;
    Ok(Report {
        clusters: n,
        namespaces: plan.fleet.namespaces,
        children_created,
        all_ready,
        converge_requests,
        converged,
        rest: plan.rest,
        rest_requests,
        settled,
        restart_settled,
        restart_requests,
        restarted,
        clusters_deleted,
        all_deleted,
    })
}

/// SIGKILLs the operator at rest and starts it again: how long until it has reconciled every
/// cluster once (its own reconcile counter), and the requests it made by then.
async fn restart(
    stand: &Stand,
    clusters: usize,
    timeout: Duration,
) -> Result<(Duration, Requests)> {
    stand.operator.operator_kill().await?;
    let mark = stand.mark()?;
    let start = Instant::now();
    stand.operator.operator_start().await?;
    loop {
        let text = stand.operator.operator_metrics().await?;
        let reconciled = metrics::sum(&text, "tusk_reconcile_total");
        if reconciled >= clusters as f64 {
            break;
        }
        if start.elapsed() > timeout {
            fail!(
                "after a restart, {reconciled} of {clusters} clusters reconciled within {timeout:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((start.elapsed(), stand.requests_since(mark)?))
}

/// The directory of the local control plane: TUSK_E2E_DIR, as e2e/local/up.sh wrote it.
pub fn stand_dir() -> Result<PathBuf> {
    let dir = std::env::var_os("TUSK_E2E_DIR").context("TUSK_E2E_DIR is not set")?;
    let dir = PathBuf::from(dir);
    if !Path::new(&dir).join("env").is_file() {
        fail!("no control plane in {} (e2e/local/up.sh)", dir.display());
    }
    Ok(dir)
}
