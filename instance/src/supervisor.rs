//! The manager's loop: every tick it looks at the Lease (as the role source last saw it), the
//! local postmaster and what the server says about itself (`monitor`), asks [`decide`] what to
//! do, and does it. Steps that take long while a server accepts writes — a promotion, a
//! demotion — are started and then followed tick by tick, never awaited: a holder past its
//! deadline is fenced whatever it is doing. A step that fails is not retried before its
//! backoff has passed, while the loop (fencing included) goes on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::checkpoint::After;
use crate::config::RunArgs;
use crate::context::Context;
use crate::data_lock::DataLock;
use crate::decide::{Action, LeaseView, Local, Upstream, decide};
use crate::error::Error;
use crate::events::Events;
use crate::monitor::{Observation, ServerFacts};
use crate::pgdata;
use crate::planned_restart::PlannedRestart;
use crate::postmaster::{Listen, Postmaster};
use crate::reaper::Reaper;
use crate::report::{ManagerState, Role, STREAMING_GRACE, SharedState};
use crate::rewind::Rejoined;
use crate::role_source::{self, Intent, Observed, RoleSource};
use crate::streaming_clock::StreamingClock;
use crate::watchdog::Watchdog;

const TICK: Duration = Duration::from_millis(250);
const SLOT_SYNC_EVERY: Duration = Duration::from_secs(5);
/// The first pause after a failed step; it doubles with each failure in a row, up to
/// [`MAX_RETRY_PAUSE`], so a broken peer, config or full disk is not hammered.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(60);
/// How long after this loop's own fencing moment the watchdog acts: while the loop runs, it
/// always fences first (and says so); the watchdog acts only on a loop that stalled. Well
/// within the Lease duration, so the old primary is down before a new one may start.
const WATCHDOG_MARGIN: Duration = Duration::from_millis(500);
/// A standby that does not stream is broken (not waiting for a failover) only while the holder
/// was seen renewing this recently.
const HOLDER_ALIVE: Duration = Duration::from_secs(5);

/// A switchover's demotion, one phase per tick.
enum Demotion {
    /// CHECKPOINT first, so the shutdown checkpoint is short while writes still flow.
    Checkpointing(tokio::task::JoinHandle<()>),
    /// A fast shutdown was asked for at this time; its end is awaited by later ticks.
    ShuttingDown(Instant),
}

/// The last failed step and when it may be tried again.
struct Failed {
    action: Action,
    retry_at: Instant,
    in_a_row: u32,
}

struct Supervisor {
    ctx: Arc<Context>,
    state: SharedState,
    observed: watch::Receiver<Observed>,
    /// What the role source is asked to do: release, abstain, record the system identifier.
    intent: watch::Sender<Intent>,
    /// The monitor's latest answer from the server.
    server: watch::Receiver<Observation>,
    /// The running postmaster's start counter, for the monitor.
    running: watch::Sender<Option<u64>>,
    events: Events,
    postmaster: Option<Postmaster>,
    generation: u64,
    fenced: bool,
    last_slot_sync: Option<Instant>,
    slot_sync: Option<tokio::task::JoinHandle<()>>,
    /// Postmasters in a row that exited within [`SHORT_LIFE`] of their start.
    short_lives: u32,
    /// When this standby was asked to promote; cleared once the server left recovery.
    promoting: Option<Instant>,
    /// The postmaster generation a checkpoint was asked of as primary (checkpoint.rs).
    checkpointed: Option<u64>,
    demotion: Option<Demotion>,
    /// Since when a standby's WAL receiver has not been streaming.
    not_streaming: StreamingClock,
    failed: Option<Failed>,
    /// The reason this manager last abstained, so the Event is posted once.
    abstained: Option<String>,
    /// Stops the primary if this loop stalls (`None` when it could not be started).
    watchdog: Option<Watchdog>,
    /// The primary's restart in place for lowered hot-standby settings.
    planned_restart: PlannedRestart,
    /// A restore to run instead of initdb on the holder's first start.
    restore: Option<crate::restore::RestorePlan>,
}

/// A postmaster that exits sooner than this is restarted with a growing pause (250 ms, then
/// doubling up to 8 s), so a broken configuration is not restarted four times a second while
/// a killed one comes back at once.
const SHORT_LIFE: Duration = Duration::from_secs(2);

pub async fn run(args: RunArgs) -> Result<(), Error> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Err(Error::Config(
            "PostgreSQL refuses to run as root: run the container as the image's postgres user"
                .into(),
        ));
    }
    hide_environment()?;
    let vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let restore = crate::restore::RestorePlan::from_vars(&vars)?;
    drop(vars);
    std::fs::create_dir_all(&args.socket_dir)
        .map_err(Error::io(format!("creating {}", args.socket_dir.display())))?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(Error::io("SIGTERM handler"))?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(Error::io("SIGINT handler"))?;
    // Before anything touches PGDATA: the pod this one replaces may still be running.
    let _data_lock = tokio::select! {
        lock = DataLock::acquire(&args.pgdata) => lock?,
        _ = sigterm.recv() => return Ok(()),
        _ = sigint.recv() => return Ok(()),
    };
    let reaper = Reaper::start()?;
    let watchdog = match Watchdog::start(&reaper) {
        Ok(watchdog) => Some(watchdog),
        Err(e) => {
            tracing::warn!(error = %e, "no watchdog: a stalled manager will not fence its primary");
            None
        }
    };
    let client = match &args.role_file {
        Some(_) => None,
        None => Some(
            kube::Client::try_default()
                .await
                .map_err(|source| Error::Kube {
                    name: args.lease.clone(),
                    source: Box::new(source),
                })?,
        ),
    };
    let events = Events::new(client.clone(), &args);
    let source = match (&args.role_file, client) {
        (Some(path), _) => RoleSource::File { path: path.clone() },
        (None, Some(client)) => {
            let address = args.pod_ip.clone().filter(|ip| !ip.is_empty());
            RoleSource::lease(client, &args.namespace, &args.lease, address)
        }
        (None, None) => return Err(Error::Config("no role source".into())),
    };
    let (observed, intent) =
        role_source::spawn(source, args.pod_name.clone(), args.renew_interval());
    // Before PostgreSQL starts: its first archive request finds the socket.
    let archiver = crate::archiver::spawn(
        &args.pgdata,
        &args.socket_dir,
        &args.namespace,
        &args.cluster,
        events.clone(),
    )?;
    let ctx = Arc::new(Context::new(args, reaper)?);
    if let Some(number) = ctx.args.preferred_sync_number().map_err(Error::Config)? {
        crate::preferred_sync::spawn(ctx.clone(), observed.clone(), number);
    }
    let (running, running_rx) = watch::channel(None);
    crate::tls_reload::spawn(ctx.clone(), running_rx.clone());
    let server = crate::monitor::spawn(ctx.clone(), running_rx);
    if let Some(archiver) = &archiver {
        let every = crate::continuity::every_from_env().map_err(Error::Config)?;
        let (archiver, observed) = (archiver.clone(), server.clone());
        crate::continuity::spawn(ctx.clone(), archiver, observed, events.clone(), every);
    }
    let state: SharedState = Arc::new(Mutex::new(ManagerState::default()));
    crate::http::serve(ctx.clone(), archiver, state.clone(), server.clone()).await?;
    let mut sup = Supervisor {
        ctx,
        state,
        observed,
        intent,
        server,
        running,
        events,
        postmaster: None,
        generation: 0,
        fenced: false,
        last_slot_sync: None,
        slot_sync: None,
        short_lives: 0,
        promoting: None,
        checkpointed: None,
        demotion: None,
        not_streaming: StreamingClock::default(),
        failed: None,
        abstained: None,
        watchdog,
        planned_restart: PlannedRestart::default(),
        restore,
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A signal also interrupts a step in progress (a clone, say): the pod is going away.
    loop {
        tokio::select! {
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            _ = async {
                tick.tick().await;
                sup.step().await;
            } => {}
        }
    }
    tracing::info!("shutting down");
    if let Some(watchdog) = &mut sup.watchdog {
        watchdog.arm(0, None);
    }
    if let Some(pm) = sup.postmaster.take() {
        // Fast shutdown: disconnect clients, checkpoint, exit.
        let status = pm.stop(libc::SIGINT, Duration::from_secs(120)).await;
        tracing::info!(%status, "postmaster stopped");
    }
    Ok(())
}

/// Makes this process non-dumpable: its `/proc/<pid>/` files (`environ` with the passwords
/// the operator passed, `mem`) then belong to root, so a backend or anything else running as
/// the postgres user cannot read them (a superuser's `pg_read_file('/proc/1/environ')`, say).
fn hide_environment() -> Result<(), Error> {
    // SAFETY: PR_SET_DUMPABLE takes a plain integer and changes only this process's flag.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(Error::io("making the manager non-dumpable")(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

impl Supervisor {
    async fn step(&mut self) {
        self.collect_exit().await;
        let observed = self.observed.borrow().clone();
        self.withdraw_release(&observed);
        let facts = self.facts();
        self.track_streaming(facts.as_ref(), &observed);
        self.finish_promotion(facts.as_ref());
        self.checkpoint_once_primary(facts.as_ref());
        let local = self.local(&observed, facts.as_ref());
        let action = decide(
            observed.lease.as_ref(),
            self.ctx.me(),
            Instant::now(),
            observed.last_renew,
            &local,
        );
        self.update_intent(observed.lease.as_ref(), &action, facts.as_ref());
        self.publish(Some(&observed));
        if !matches!(action, Action::Demote) {
            self.cancel_demotion();
        }
        if self.backing_off(&action) {
            return;
        }
        // A demoted holder repeats Demote until its release is written: logged once.
        let releasing = action == Action::Demote && self.intent.borrow().release_lsn.is_some();
        let quiet = matches!(action, Action::Wait | Action::Abstain) || releasing;
        if !quiet {
            tracing::info!(?action, ?local, "acting");
        }
        let lease = observed.lease.as_ref();
        match self.execute(&action, lease).await {
            Ok(()) => self.failed = None,
            Err(e) => {
                tracing::error!(?action, error = %e, "step failed");
                self.note_failure(action.clone());
            }
        }
        let settled = self
            .postmaster
            .as_ref()
            .is_some_and(|pm| pm.started.elapsed() > SHORT_LIFE);
        if action == Action::Wait && local == Local::Primary && settled {
            self.sync_slots(&observed);
            self.restart_for_lowered_settings(facts.as_ref());
        }
        // As things are after the action: a primary just started is watched from its start.
        let now = self.local(&observed, self.facts().as_ref());
        self.arm_watchdog(&observed, &now);
        self.publish(Some(&observed));
    }

    /// Tells the watchdog until when the running primary may run: the moment this loop would
    /// fence it. Anything else disarms it.
    fn arm_watchdog(&mut self, observed: &Observed, local: &Local) {
        let Some(watchdog) = &mut self.watchdog else {
            return;
        };
        let holder = observed
            .lease
            .as_ref()
            .filter(|l| l.holder.as_deref() == Some(self.ctx.me()));
        let until = match (&self.postmaster, holder, observed.last_renew) {
            (Some(pm), Some(lease), Some(renewed)) if *local == Local::Primary && !self.fenced => {
                Some((pm.pid, renewed + lease.renew_deadline() + WATCHDOG_MARGIN))
            }
            _ => None,
        };
        match until {
            Some((pid, until)) => watchdog.arm(pid, Some(until)),
            None => watchdog.arm(0, None),
        }
    }

    /// Notices a postmaster that exited, expected (a demotion's shutdown) or not.
    async fn collect_exit(&mut self) {
        let Some(pm) = &mut self.postmaster else {
            return;
        };
        let Some(status) = pm.exited() else {
            return;
        };
        let demoting = matches!(self.demotion, Some(Demotion::ShuttingDown(_)));
        let planned = self.planned_restart.ended();
        if demoting {
            tracing::info!(%status, "postmaster shut down for the switchover");
        } else if planned {
            tracing::info!(%status, "postmaster shut down to take lowered settings");
        } else {
            tracing::warn!(%status, "postmaster exited");
            if !self.fenced {
                let note = format!("PostgreSQL exited ({status}); the manager decides its restart");
                self.events.warning("PostgreSQLExited", "Restart", note);
            }
        }
        self.short_lives = if pm.started.elapsed() < SHORT_LIFE && !demoting && !planned {
            self.short_lives.saturating_add(1)
        } else {
            0
        };
        self.stopped();
        self.publish(None);
        if self.short_lives > 0 {
            let pause = Duration::from_millis(250) * 2u32.pow(self.short_lives.min(6) - 1);
            tokio::time::sleep(pause).await;
        }
    }

    /// The server's answer about the running postmaster, if recent.
    fn facts(&self) -> Option<ServerFacts> {
        let running = self.postmaster.as_ref().map(|_| self.generation);
        self.server.borrow().fresh(running).cloned()
    }

    /// Follows a standby's WAL receiver: since when it has not streamed.
    fn track_streaming(&mut self, facts: Option<&ServerFacts>, observed: &Observed) {
        let standby = self.postmaster.as_ref().is_some_and(|pm| pm.standby);
        let streaming = crate::streaming_clock::streams(facts, standby);
        let following = observed
            .lease
            .as_ref()
            .and_then(|l| Some((l.holder.clone()?, l.holder_address.clone())));
        self.not_streaming
            .observe(streaming, following, Instant::now());
    }

    /// A promotion ends when the server says it left recovery.
    fn finish_promotion(&mut self, facts: Option<&ServerFacts>) {
        let (Some(asked), Some(false)) = (self.promoting, facts.map(|f| f.in_recovery)) else {
            return;
        };
        self.promoting = None;
        if let Some(pm) = &mut self.postmaster {
            pm.standby = false;
            pm.upstream = None;
        }
        self.last_slot_sync = None;
        let took = asked.elapsed();
        tracing::info!(?took, "promoted");
        let note = format!(
            "promoted to primary: this pod holds the Lease ({:.2}s)",
            took.as_secs_f64()
        );
        self.events.normal("Promoted", "Promote", note);
        self.checkpointed = Some(self.generation);
        crate::checkpoint::spawn(self.ctx.clone(), After::Promotion);
    }

    /// Once per postmaster that the server says is a primary, unless a promotion did it.
    fn checkpoint_once_primary(&mut self, facts: Option<&ServerFacts>) {
        let primary = facts.is_some_and(|f| !f.in_recovery) && self.promoting.is_none();
        if primary && self.postmaster.is_some() && self.checkpointed != Some(self.generation) {
            self.checkpointed = Some(self.generation);
            crate::checkpoint::spawn(self.ctx.clone(), After::Start);
        }
    }

    /// The local server as it is: a running one's role as the server itself says.
    fn local(&self, observed: &Observed, facts: Option<&ServerFacts>) -> Local {
        let pgdata = self.ctx.pgdata();
        let expected = observed
            .lease
            .as_ref()
            .and_then(|l| l.system_identifier.as_deref());
        match &self.postmaster {
            Some(pm) => {
                let in_recovery = facts.map_or(pm.standby, |f| f.in_recovery);
                if !in_recovery {
                    Local::Primary
                } else if self.promoting.is_some() {
                    Local::Promoting
                } else {
                    let holder_alive = observed
                        .holder_renewed
                        .is_some_and(|at| at.elapsed() < HOLDER_ALIVE);
                    let stalled = holder_alive
                        && self
                            .not_streaming
                            .since()
                            .is_some_and(|since| since.elapsed() >= STREAMING_GRACE);
                    Local::Standby {
                        upstream: pm.upstream.clone(),
                        stalled,
                    }
                }
            }
            None if !pgdata::initialized(pgdata) => Local::NoData,
            None if pgdata::check_system(pgdata, expected, "the local data").is_err() => {
                Local::Foreign
            }
            None => Local::Stopped {
                standby: pgdata::is_standby(pgdata),
            },
        }
    }

    /// What the role source should do: abstain while told to (or asked to release), and record
    /// the system identifier of a primary's database.
    fn update_intent(
        &mut self,
        lease: Option<&LeaseView>,
        action: &Action,
        facts: Option<&ServerFacts>,
    ) {
        let me = self.ctx.me();
        let asked = lease.is_some_and(|l| l.release_requested.as_deref() == Some(me));
        let abstain = *action == Action::Abstain || asked;
        let system = facts
            .filter(|f| !f.in_recovery)
            .and_then(|f| f.system_identifier.clone());
        self.intent.send_if_modified(|intent| {
            let before = intent.clone();
            intent.abstain = abstain;
            if system.is_some() {
                intent.system_identifier.clone_from(&system);
            }
            *intent != before
        });
        if !abstain {
            self.abstained = None;
            return;
        }
        let why = if asked {
            "the operator asked this holder to release the Lease (it renewed without serving)"
        } else if matches!(action, Action::Abstain) && pgdata::initialized(self.ctx.pgdata()) {
            "the local data belongs to another database system than the cluster's"
        } else {
            "the volume holds no data although the cluster has bootstrapped: it is never \
             initialised again"
        };
        if self.abstained.as_deref() != Some(why) {
            tracing::warn!(why, "not renewing the Lease: a replica takes over");
            let note = format!(
                "{why}; not renewing the Lease so that a replica takes over, then cloning it"
            );
            self.events.warning("LeaseAbandoned", "Abstain", note);
            self.abstained = Some(why.to_owned());
        }
    }

    /// Whether `action` failed recently and its backoff has not passed.
    fn backing_off(&self, action: &Action) -> bool {
        self.failed
            .as_ref()
            .is_some_and(|f| f.action == *action && Instant::now() < f.retry_at)
    }

    fn note_failure(&mut self, action: Action) {
        let in_a_row = match &self.failed {
            Some(f) if f.action == action => f.in_a_row + 1,
            _ => 1,
        };
        let pause = RETRY_PAUSE
            .saturating_mul(2u32.saturating_pow(in_a_row - 1))
            .min(MAX_RETRY_PAUSE);
        self.failed = Some(Failed {
            action,
            retry_at: Instant::now() + pause,
            in_a_row,
        });
    }

    async fn execute(&mut self, action: &Action, lease: Option<&LeaseView>) -> Result<(), Error> {
        let ctx = self.ctx.clone();
        let expected = lease.and_then(|l| l.system_identifier.clone());
        match action {
            Action::Wait => {}
            Action::Abstain => self.set_role(Role::Lost),
            Action::Initdb => {
                self.set_role(Role::Initializing);
                match &self.restore {
                    Some(plan) => {
                        if let Err(e) = crate::restore::run(&ctx, plan).await {
                            // Retried with backoff; the operator's condition points here.
                            let note = format!("restoring backup {}: {e}", plan.backup_id);
                            self.events.warning("RestoreFailed", "Restore", note);
                            return Err(e);
                        }
                        let note = format!("restored backup {} and recovered", plan.backup_id);
                        self.events.normal("Restored", "Restore", note);
                    }
                    None => pgdata::initdb(&ctx).await?,
                }
            }
            Action::StartPrimary => {
                // A stopped standby starts as one and is promoted next tick: starting it
                // without standby.signal would continue its timeline instead of forking one.
                self.start(Listen::Configured, None)?;
            }
            Action::StartStandby { upstream } => {
                pgdata::write_standby_config(&ctx, upstream)?;
                self.start(Listen::Configured, Some(upstream.clone()))?;
            }
            Action::Clone { from } => {
                self.set_role(Role::Initializing);
                pgdata::clone_from(&ctx, from, expected.as_deref()).await?;
                let note = format!("cloned from {from} with pg_basebackup");
                self.events.normal("Cloned", "Clone", note);
            }
            Action::Reclone { from } => {
                self.set_role(Role::Initializing);
                let why = "the local data belongs to another database system".to_owned();
                let rejoined = crate::rewind::reclone(&ctx, from, expected.as_deref(), why).await?;
                self.report_rejoin(from, &rejoined);
            }
            Action::Rewind { from, stalled } => {
                if let Some(pm) = self.postmaster.take() {
                    // A standby that stopped streaming: stopped cleanly first.
                    pm.stop(libc::SIGINT, Duration::from_secs(60)).await;
                    self.stopped();
                }
                self.set_role(Role::Initializing);
                let rejoined =
                    crate::rewind::rejoin(&ctx, from, *stalled, expected.as_deref()).await?;
                self.report_rejoin(from, &rejoined);
            }
            Action::Promote => {
                // Asked once the server answers; the promotion then runs on its own.
                if self.promoting.is_none() && self.facts().is_some() {
                    crate::promote::request(&ctx).await?;
                    self.promoting = Some(Instant::now());
                    tracing::info!("promotion asked for");
                }
            }
            Action::Repoint { upstream } => {
                pgdata::write_standby_config(&ctx, upstream)?;
                if let Some(pm) = &mut self.postmaster {
                    // primary_conninfo is reloadable: the WAL receiver restarts toward it.
                    pm.reload();
                    pm.upstream = Some(upstream.clone());
                }
                tracing::info!(
                    upstream = upstream.name,
                    address = upstream.address,
                    "following a new upstream"
                );
            }
            Action::Demote => self.demote().await?,
            Action::Fence => self.fence().await,
        }
        Ok(())
    }

    /// One phase of a switchover's demotion: checkpoint, fast shutdown, then the release.
    async fn demote(&mut self) -> Result<(), Error> {
        if self.intent.borrow().release_lsn.is_some() {
            return Ok(());
        }
        let Some(pm) = &self.postmaster else {
            // Shut down: the final checkpoint is the last WAL; release the Lease naming it.
            self.demotion = None;
            let lsn = crate::demote::final_lsn(&self.ctx).await?;
            tracing::info!(final_lsn = lsn, "demoted: releasing the Lease");
            let note = format!(
                "shut down cleanly for a switchover; releasing the Lease at final LSN {lsn}"
            );
            self.events.normal("Demoted", "Switchover", note);
            self.intent
                .send_modify(|intent| intent.release_lsn = Some(lsn));
            return Ok(());
        };
        match &self.demotion {
            None => {
                let ctx = self.ctx.clone();
                let task = tokio::spawn(async move { crate::demote::checkpoint(&ctx).await });
                self.demotion = Some(Demotion::Checkpointing(task));
            }
            Some(Demotion::Checkpointing(task)) if task.is_finished() => {
                pm.signal(libc::SIGINT);
                self.demotion = Some(Demotion::ShuttingDown(Instant::now()));
            }
            Some(Demotion::ShuttingDown(since))
                if since.elapsed() > crate::demote::SHUTDOWN_TIMEOUT =>
            {
                // Not clean: no final LSN will be released, and the operator aborts.
                tracing::warn!("the fast shutdown did not finish in time: SIGKILL");
                pm.signal(libc::SIGKILL);
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// A demotion that is no longer asked for (fenced, or the switchover was withdrawn) stops
    /// where it is; a shutdown already asked for goes on, and the server starts again after.
    fn cancel_demotion(&mut self) {
        if let Some(Demotion::Checkpointing(task)) = &self.demotion {
            task.abort();
        }
        if matches!(self.demotion, Some(Demotion::Checkpointing(_))) {
            self.demotion = None;
        }
    }

    async fn fence(&mut self) {
        self.fenced = true;
        self.promoting = None;
        self.cancel_demotion();
        self.demotion = None;
        if let Some(pm) = self.postmaster.take() {
            let status = pm.stop(libc::SIGQUIT, Duration::from_secs(10)).await;
            self.stopped();
            tracing::warn!(%status, "fenced: postmaster stopped immediately");
            let note = "stopped PostgreSQL immediately: this pod may not run as primary \
                        (the Lease is another's, or was not renewed in time)"
                .to_owned();
            self.events.warning("Fenced", "Fence", note);
        }
        // Only now: /status says `fenced` once the postmaster is gone, not before.
        self.publish(None);
    }

    fn report_rejoin(&self, from: &str, rejoined: &Rejoined) {
        match rejoined {
            Rejoined::Rewound => {
                let note = format!("rewound with pg_rewind to follow {from}");
                self.events.normal("Rewound", "Rejoin", note);
            }
            Rejoined::Recloned { why, kept, dropped } => {
                let kept = match kept {
                    Some(path) => {
                        format!("the previous data directory is kept at {}", path.display())
                    }
                    None => "the previous data directory could not be moved and was cleared".into(),
                };
                let note = format!("{why}: cloned {from} again; {kept}");
                self.events.warning("Recloned", "Rejoin", note);
                if let Some(dropped) = dropped {
                    let note = format!(
                        "removed {}, the copy kept by an earlier re-clone, to make room for this one",
                        dropped.display()
                    );
                    self.events.warning("DivergedCopyRemoved", "Rejoin", note);
                }
            }
        }
    }

    /// A release request outlives its switchover only until the Lease no longer asks for one
    /// (the operator aborted it, or the Lease has moved on): then the holder renews again.
    fn withdraw_release(&self, observed: &Observed) {
        let asked = observed.lease.as_ref().is_some_and(|lease| {
            lease.holder.as_deref() == Some(self.ctx.me()) && lease.switchover_to.is_some()
        });
        if !asked && self.intent.borrow().release_lsn.is_some() {
            self.intent.send_modify(|intent| intent.release_lsn = None);
        }
    }

    fn start(&mut self, listen: Listen, upstream: Option<Upstream>) -> Result<(), Error> {
        let pm = Postmaster::start(&self.ctx, listen, upstream)?;
        self.postmaster = Some(pm);
        self.generation += 1;
        self.running.send_replace(Some(self.generation));
        self.fenced = false;
        self.last_slot_sync = None;
        self.not_streaming.reset();
        Ok(())
    }

    /// The postmaster is gone: whatever it was doing is over.
    fn stopped(&mut self) {
        self.planned_restart.ended();
        self.postmaster = None;
        self.running.send_replace(None);
        self.promoting = None;
        self.not_streaming.reset();
        if !matches!(self.demotion, Some(Demotion::ShuttingDown(_))) {
            self.demotion = None;
        }
    }

    /// A primary whose ConfigMap lowered a hot-standby setting restarts in place, first.
    /// Without facts (the server shutting down stops answering) a restart under way is still
    /// followed, and hurried if slow.
    fn restart_for_lowered_settings(&mut self, facts: Option<&ServerFacts>) {
        let Some(pm) = &self.postmaster else {
            return;
        };
        let lowered = facts.map_or(&[][..], |f| f.lowered.as_slice());
        if let Some(note) = self.planned_restart.consider(pm, lowered) {
            tracing::info!(?lowered, "restarting in place for lowered settings");
            self.events
                .normal("RestartingForLoweredSettings", "Restart", note);
        }
    }

    /// Runs the slot sync as a background task: a slow or hung query on the primary must never
    /// hold up the loop that fences it.
    fn sync_slots(&mut self, observed: &Observed) {
        if let Some(task) = &self.slot_sync {
            if !task.is_finished() {
                return;
            }
            self.slot_sync = None;
        }
        if self
            .last_slot_sync
            .is_some_and(|at| at.elapsed() < SLOT_SYNC_EVERY)
        {
            return;
        }
        let Some(lease) = &observed.lease else {
            return;
        };
        // Attempts are spaced whether or not they succeed; a failure is logged and retried.
        self.last_slot_sync = Some(Instant::now());
        let (ctx, members) = (self.ctx.clone(), lease.instances.clone());
        self.slot_sync = Some(tokio::spawn(async move {
            let sync = async {
                crate::slots::sync(&ctx, &members).await?;
                crate::slots::bound_retention(&ctx).await
            };
            match tokio::time::timeout(SLOT_SYNC_EVERY, sync).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "syncing replication slots"),
                Err(_) => tracing::warn!("syncing replication slots timed out"),
            }
        }));
    }

    fn set_role(&self, role: Role) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.role = role;
    }

    /// Publishes the state for /status: what runs, not what the Lease wishes (the report takes
    /// a running server's role from the server itself).
    fn publish(&self, observed: Option<&Observed>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.role = match &self.postmaster {
            _ if self.fenced => Role::Fenced,
            Some(pm) if pm.standby => Role::Replica,
            Some(_) => Role::Primary,
            None if state.role == Role::Lost && self.abstained.is_some() => Role::Lost,
            None if state.role == Role::Initializing => Role::Initializing,
            None => Role::Stopped,
        };
        state.postgres_running = self.postmaster.is_some();
        state.generation = self.postmaster.as_ref().map(|_| self.generation);
        state.fenced = self.fenced;
        state.not_streaming_since = self.not_streaming.since();
        if let Some(observed) = observed {
            state.lease_holder = observed.lease.as_ref().and_then(|l| l.holder.clone());
            state.lease_read_at = observed.last_read;
            state.renew_deadline = observed
                .lease
                .as_ref()
                .map_or(Duration::ZERO, LeaseView::renew_deadline);
        }
    }
}
