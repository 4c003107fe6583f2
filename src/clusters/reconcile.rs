//! One reconcile of one cluster, as its phases: validate → build (`desired`) → apply
//! (`children`, the restore, `ha`, the backups) → report (`report`: the status and every Event).
//! Each phase is a function of its own room; this file only orders them.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::archiving;
use super::backup_schedule::{self, freshness::Freshness};
use super::children::apply_children;
use super::cleanup;
use super::creation_lane;
use super::credentials;
use super::declared;
use super::desired::desired;
use super::ha::{self, PrimaryState};
use super::report;
use super::restore;
use super::status::{BackupSchedule, Outcome};
use super::upgrade;
use super::validate::validate;
use crate::crd::PostgreSQL;
use crate::error::{Error, Result};
use crate::resources::Cluster;
use crate::runtime::Context;
use crate::runtime::settle::{Settled, settle};

/// Healthy clusters are re-checked this often even without a watch event.
const RESYNC: Duration = Duration::from_secs(600);
/// The soonest a failed reconcile is retried, even while the primary step watches closely.
const MIN_RETRY: Duration = Duration::from_millis(200);
/// How long a reconcile waits for the child caches after the operator starts.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// The main queue's reconcile: a cluster still to be created goes to the creation lane (see
/// `creation_lane`), decided before the turn is taken; any other is reconciled here.
pub async fn reconcile(pg: Arc<PostgreSQL>, ctx: Arc<Context>) -> Result<Action> {
    if creation_lane::hand_over(&pg, &ctx) {
        return Ok(Action::await_change());
    }
    reconcile_now(pg, ctx).await
}

/// The creation lane's reconcile: the whole reconcile while the cluster is still to be created,
/// else nothing (the main queue has it).
pub async fn reconcile_new(pg: Arc<PostgreSQL>, ctx: Arc<Context>) -> Result<Action> {
    if !creation_lane::still_new(&pg, &ctx) {
        return Ok(Action::await_change());
    }
    reconcile_now(pg, ctx).await
}

/// The reconcile itself, on whichever queue runs it.
pub async fn reconcile_now(pg: Arc<PostgreSQL>, ctx: Arc<Context>) -> Result<Action> {
    // One turn at a time with the other lanes; the wait counts as the reconcile's time.
    let started = Instant::now();
    let key = ObjectRef::from_obj(pg.as_ref()).to_string();
    let _turn = ctx.cluster_locks.turn(&key).await;
    // With the status the last reconcile wrote, if the watch has not brought it back yet.
    let pg = ctx.own_status.freshest(pg);
    let settled = settle(
        pg.as_ref(),
        &ctx.backoff,
        reconcile_cluster(&pg, &ctx).await,
    );
    ctx.metrics.reconciled(settled.label(), started.elapsed());
    if let Some(uid) = pg.metadata.uid.as_deref() {
        ctx.metrics.cluster_reconciled(uid);
    }
    if let Settled::Failed(error) = &settled {
        report::report_error(&pg, &ctx, error).await;
    }
    settled.into_result()
}

/// The controller's error policy: per-object exponential backoff with jitter, but never later
/// than the primary step wanted to look again (a failing later step must not delay a failover).
pub fn error_policy(pg: Arc<PostgreSQL>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(pg.as_ref()).to_string();
    let delay = retry_delay(&pg, &ctx);
    let delay = ctx
        .lease_clock
        .recheck(&key)
        .map_or(delay, |recheck| delay.min(recheck.max(MIN_RETRY)));
    tracing::warn!(cluster = %kube::ResourceExt::name_any(pg.as_ref()), namespace = ?pg.meta().namespace, %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// Records one more failure of `pg` and returns how long to wait before retrying it.
pub fn retry_delay(pg: &PostgreSQL, ctx: &Context) -> Duration {
    ctx.backoff.next_delay(&ObjectRef::from_obj(pg))
}

async fn reconcile_cluster(pg: &PostgreSQL, ctx: &Context) -> Result<Action> {
    let cluster = Cluster::new(pg)?;
    if pg.meta().deletion_timestamp.is_some() {
        // Children go with the owner (garbage collection); only the bucket needs us.
        return cleanup::finalize(pg, ctx).await;
    }
    // Validate, then build every child: both pure, and both refuse before anything is applied.
    let built = validate(&pg.spec)
        .and_then(|()| Ok(desired(&cluster, &ctx.agent, &ctx.operator_namespace)?));
    caches_synced(ctx).await?;
    let children = match built {
        Ok(children) => children,
        Err(invalid) => return refuse_spec(pg, &cluster, &invalid.to_string(), ctx).await,
    };
    let mut phases = Phases::start();
    // Who is primary comes first: no other step's failure and no phase may hold up a failover.
    let primary = primary_step(pg, &cluster, ctx).await?;
    phases.mark("primary");
    let pg = &finalized(pg, ctx).await?;

    // Apply: the children (clients and backups held back until a restore has finished), the
    // restore, the backups' records.
    let observed = restore::observe(pg, &cluster, ctx).await?;
    let held = observed.holds_clients();
    let move_recheck = route_clients(&cluster, &primary, !held, ctx).await?;
    let restore_recheck = observed.recheck();
    let mut children = children;
    if observed.holds_pods() {
        // A restore refused before it began: no pod may start it (the volumes stay unbound).
        children.statefulset.spec.replicas = Some(0);
    }
    let applied = Box::pin(apply_children(&cluster, children, ctx, held)).await?;
    phases.mark("children");
    let mut writes = applied.writes;
    let restore = match observed.progress() {
        Some(progress) => progress,
        None => {
            let (progress, job) = restore::start(&cluster, &applied.readiness, ctx).await?;
            writes.extend(job);
            progress
        }
    };
    writes.extend(primary.writes.iter().cloned());
    let scheduled = applied.backup == BackupSchedule::Scheduled;
    let backups = backup_schedule::observe(pg, &cluster, scheduled, ctx).await?;
    writes.extend(backups.writes.iter().cloned());
    let archiving = archiving::observe(&cluster, &primary, ctx).await;
    writes.extend(archiving::backup_after_gap(&cluster, &archiving, ctx).await?);
    let check_owed = archiving::check_owed(&archiving, &backups.summary, Timestamp::now());
    let (declared, declared_writes) = declared::hand_over(&cluster, &primary, ctx).await?;
    writes.extend(declared_writes);
    let declared_recheck = declared::status(&pg.spec.roles, &pg.spec.databases, &declared).recheck;
    let upgrade = Box::pin(upgrade::step(pg, &cluster, &primary, ctx)).await;
    phases.mark("observe");

    // Report: the writes, the status, then what was found.
    report::writes(
        pg,
        &cluster,
        ctx,
        &writes,
        backups.verification_asked.as_deref(),
    )
    .await;
    let (request_done, recheck) = (primary.request_done, primary.recheck);
    let outcome = Outcome::Applied {
        readiness: applied.readiness,
        backup: applied.backup,
        restore,
        backups: Box::new(backups.summary),
        storage: applied.storage,
        primary: Box::new(primary),
        archiving: Box::new(archiving),
        declared: Box::new(declared),
        upgrade: Box::new(upgrade.clone()),
    };
    report::update_status(pg, &cluster, &outcome, ctx).await?;
    if request_done {
        // Only now: a patch of the object before would make that status write stale.
        ha::switchover::clear_request(pg, ctx).await?;
    }
    report::findings(pg, ctx, &outcome).await;
    phases.mark("status");
    tracing::debug!(cluster = cluster.name, %phases, "reconciled");
    let now = Timestamp::now();
    let next = next_check(&backups.freshness, backups.verify_at, recheck, now);
    let next = check_owed.map_or(next, |soon| next.min(soon));
    let next = restore_recheck.map_or(next, |soon| next.min(soon));
    let next = declared_recheck.map_or(next, |soon| next.min(soon));
    let next = upgrade.recheck.map_or(next, |soon| next.min(soon));
    let next = move_recheck.map_or(next, |soon| next.min(soon));
    // A Secret the user brings is not watched: its renewals reach the credentials by this.
    let next = match cluster.user_server_secret() {
        Some(_) => next.min(USER_SECRET_RECHECK),
        // A second late, so that the step is due when it runs.
        None => credentials::until_certificates_due(&cluster, ctx)
            .map_or(next, |until| next.min(until + Duration::from_secs(1))),
    };
    Ok(Action::requeue(next))
}

/// Where a reconcile's time went, phase by phase (logged at debug: a slow switchover or a
/// fleet's backlog is read from it).
struct Phases {
    last: Instant,
    spent: Vec<(&'static str, Duration)>,
}

impl Phases {
    fn start() -> Self {
        Self {
            last: Instant::now(),
            spent: Vec::with_capacity(4),
        }
    }

    fn mark(&mut self, phase: &'static str) {
        let now = Instant::now();
        self.spent.push((phase, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (phase, spent)) in self.spent.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{phase}={}ms", spent.as_millis())?;
        }
        Ok(())
    }
}

/// The primary step (`ha`), remembering how soon it wants to look again: a later step's error
/// must not delay a failover by its backoff (see [`error_policy`]).
async fn primary_step(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    ctx: &Context,
) -> Result<PrimaryState> {
    // Boxed: the reconcile future is large enough to overflow a test thread's stack.
    let primary = Box::pin(ha::step(pg, cluster, ctx)).await?;
    let key = ObjectRef::from_obj(pg).to_string();
    ctx.lease_clock.want_recheck(&key, primary.recheck);
    Ok(primary)
}

/// A spec the operator cannot realise: reported, not retried until it changes. A cluster that
/// has its Lease keeps its primary looked after meanwhile (failover included); a new one gets
/// nothing, not even its Lease.
async fn refuse_spec(
    pg: &PostgreSQL,
    cluster: &Cluster<'_>,
    message: &str,
    ctx: &Context,
) -> Result<Action> {
    let has_lease = pg
        .status
        .as_ref()
        .is_some_and(|s| s.current_primary.is_some());
    let primary = match has_lease {
        true => Some(primary_step(pg, cluster, ctx).await?),
        false => None,
    };
    let mut move_recheck = None;
    if let Some(primary) = &primary {
        // As the spec was when it was valid: clients wait while a restore has not finished.
        let restoring = pg.spec.restore.is_some()
            && pg.status.as_ref().is_none_or(|s| s.restored_from.is_none());
        move_recheck = route_clients(cluster, primary, !restoring, ctx).await?;
    }
    let recheck = primary.as_ref().and_then(|p| p.recheck);
    let recheck = recheck.into_iter().chain(move_recheck).min();
    report::invalid_spec(pg, cluster, message.to_owned(), primary, ctx).await?;
    Ok(recheck.map_or_else(Action::await_change, Action::requeue))
}

/// `-rw` follows the holder in the reconcile that found it (a failover's included), before any
/// child is applied, then `-ro` and `-r` follow the instances; `clients` false while a restore
/// holds applications back; then a Service of an earlier Tusk moves over, returning how soon
/// that move wants the next pass.
async fn route_clients(
    cluster: &Cluster<'_>,
    primary: &PrimaryState,
    clients: bool,
    ctx: &Context,
) -> Result<Option<Duration>> {
    let pods = ha::pods::cluster_pods(ctx, cluster);
    let holder = primary.current.as_deref();
    let force = primary.unrouted;
    ha::routing::route(ctx, cluster, &pods, holder, clients, force).await?;
    ha::routing::route_readers(ctx, cluster, &pods, holder, clients).await?;
    ha::selector_move::move_services(ctx, cluster).await
}

/// Waits (bounded) until every child cache has been filled by its first list.
async fn caches_synced(ctx: &Context) -> Result<()> {
    match tokio::time::timeout(CACHE_SYNC_TIMEOUT, ctx.caches.children_ready()).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(Error::CachesNotSynced(CACHE_SYNC_TIMEOUT)),
    }
}

/// `pg` with the finalizer it should carry, as patched (its new resourceVersion) when the
/// finalizer had to be added or removed.
async fn finalized<'a>(pg: &'a PostgreSQL, ctx: &Context) -> Result<Cow<'a, PostgreSQL>> {
    let wants = cleanup::wants_finalizer(pg);
    if wants == cleanup::has_finalizer(pg) {
        return Ok(Cow::Borrowed(pg));
    }
    Ok(Cow::Owned(cleanup::set_finalizer(pg, ctx, wants).await?))
}

/// When to look again: the resync interval, or sooner when backups turn overdue, a
/// verification is due or the primary is being watched.
/// How often a cluster with `spec.tls.serverSecret` looks at that Secret again.
const USER_SECRET_RECHECK: Duration = Duration::from_secs(60);

fn next_check(
    freshness: &Freshness,
    verify_at: Option<Timestamp>,
    primary: Option<Duration>,
    now: Timestamp,
) -> Duration {
    let until_verify = verify_at
        .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
        .map(|d| d + Duration::from_secs(1));
    [until_verify, primary]
        .into_iter()
        .flatten()
        .fold(until_overdue(freshness, now), Duration::min)
}

/// The resync interval, or sooner when backups turn overdue before it: the condition changes
/// even though no event arrives.
fn until_overdue(freshness: &Freshness, now: Timestamp) -> Duration {
    let Freshness::Fresh { overdue_at } = freshness else {
        return RESYNC;
    };
    let until = Duration::try_from(overdue_at.duration_since(now)).unwrap_or_default();
    (until + Duration::from_secs(1)).min(RESYNC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rechecks_when_backups_would_turn_overdue_before_the_resync() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let soon = Freshness::Fresh {
            overdue_at: Timestamp::from_second(1_000_090).unwrap(),
        };
        assert_eq!(until_overdue(&soon, now), Duration::from_secs(91));
        let later = Freshness::Fresh {
            overdue_at: Timestamp::from_second(2_000_000).unwrap(),
        };
        assert_eq!(until_overdue(&later, now), RESYNC);
        assert_eq!(until_overdue(&Freshness::Unknown, now), RESYNC);
    }
}
