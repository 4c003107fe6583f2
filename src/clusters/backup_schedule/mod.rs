//! The cluster's backups as its reconcile sees them: every scheduled run recorded as a Backup
//! (`scheduled_runs`), what the status says about them (`summary`), whether they are overdue
//! (`freshness`) and the schedule of their verifications (`verification` decides, `verify`
//! asks). The Backup controller runs the Jobs; this room only reads the Backups and asks.

pub mod freshness;
pub mod scheduled_runs;
pub mod summary;
pub mod verification;
mod verify;

use k8s_openapi::jiff::Timestamp;

use self::freshness::Freshness;
use self::summary::Summary;
use crate::crd::{Backup, PostgreSQL};
use crate::error::Result;
use crate::resources::Cluster;
use crate::runtime::Context;
use crate::runtime::apply::Written;

/// What one reconcile found about the cluster's backups, and what it did about them.
#[derive(Clone, Debug)]
pub struct Observed {
    pub summary: Summary,
    pub freshness: Freshness,
    /// When a verification is due next (or its window ends).
    pub verify_at: Option<Timestamp>,
    /// A sentence for the Event of the scheduled verification this reconcile asked for.
    pub verification_asked: Option<String>,
    /// The Backups created for scheduled runs.
    pub writes: Vec<Written>,
}

/// Records the scheduled runs, summarizes the cluster's Backups and asks for a verification
/// when one is due. `scheduled`: the backup CronJob is active (freshness is judged only then).
pub async fn observe(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    scheduled: bool,
    ctx: &Context,
) -> Result<Observed> {
    let writes = scheduled_runs::record_scheduled_runs(cluster, ctx).await?;
    let backups = (ctx.caches.backups_by_cluster).objects(cluster.namespace, cluster.name);
    let own: Vec<&Backup> = backups.iter().map(AsRef::as_ref).collect();
    let mut summary = summary::summarize(own.iter().copied(), cluster.name);
    let verifications = verify::schedule(cluster, &own, &mut summary, ctx).await?;
    let freshness = match &cluster.spec.backup {
        Some(policy) if scheduled => {
            let since = freshness::since(pg.status.as_ref(), summary.last_successful.as_ref());
            freshness::check(&policy.schedule, since, Timestamp::now())
        }
        _ => Freshness::Unknown,
    };
    if let Freshness::Overdue { message } = &freshness {
        summary.overdue = Some(message.clone());
    }
    Ok(Observed {
        summary,
        freshness,
        verify_at: verifications.next,
        verification_asked: verifications.asked,
        writes,
    })
}
