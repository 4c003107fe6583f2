//! The manager's loop: every tick it looks at the Lease (as the role source last saw it), the
//! local postmaster and what the server says about itself (`monitor`), asks [`decide`] what to
//! do, and does it. Steps that take long while a server accepts writes — a promotion, a
//! demotion — are started and then followed tick by tick, never awaited: a holder past its
//! deadline is fenced whatever it is doing. A step that fails is not retried before its
//! backoff has passed, while the loop (fencing included) goes on.

mod execute;
mod intent;
mod startup;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::checkpoint::After;
use crate::context::Context;
use crate::decide::{Action, LeaseView, Local, Upstream, decide};
use crate::error::Error;
use crate::events::Events;
use crate::monitor::{Observation, ServerFacts};
use crate::pgdata;
use crate::planned_restart::PlannedRestart;
use crate::postmaster::{Listen, Postmaster};
use crate::report::{Role, STREAMING_GRACE, SharedState};
use crate::role_source::{Intent, Observed};
use crate::streaming_clock::StreamingClock;
use crate::watchdog::Watchdog;

pub use startup::run;

const TICK: Duration = Duration::from_millis(250);
/// The tick while a switchover, a promotion or a demotion is followed: each of their phases (a
/// checkpoint done, the postmaster gone, recovery ended) is noticed this much sooner, and a
/// switchover's write pause is the sum of them.
const TRANSITION_TICK: Duration = Duration::from_millis(50);
const SLOT_SYNC_EVERY: Duration = Duration::from_secs(5);
/// The first pause after a failed step; it doubles with each failure in a row, up to
/// [`MAX_RETRY_PAUSE`], so a broken peer, config or full disk is not hammered.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(60);
/// Before a step that waits on another instance is tried again (`Error::NotYet`): an old
/// primary rewinds as soon as the new one has checkpointed its timeline, and with synchronous
/// replication on two instances the new primary's commits wait for it.
const NOT_YET_PAUSE: Duration = Duration::from_millis(100);
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
    /// Whether this process has made the machine roles (`roles::keep_machine_roles`).
    machine_roles_kept: Arc<std::sync::atomic::AtomicBool>,
    /// The roles and databases the spec declares (`declared`), kept with the machine roles.
    declared: watch::Receiver<Option<tusk_contract::declared::Document>>,
    /// Secret `<cluster>-verifiers` as the API shows it (the mounted copy lags a minute and
    /// more); none in tests, which write the mounted files.
    verifiers: Option<watch::Receiver<crate::declared::source::SecretData>>,
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

impl Supervisor {
    /// How long until the next step, unless the Lease changes first.
    fn tick(&self) -> Duration {
        if self.ctx.hurry() {
            TRANSITION_TICK
        } else {
            TICK
        }
    }

    async fn step(&mut self) {
        self.collect_exit().await;
        let observed = self.observed.borrow().clone();
        let switching = (observed.lease.as_ref()).is_some_and(|l| l.switchover_to.is_some());
        self.ctx
            .set_hurry(switching || self.promoting.is_some() || self.demotion.is_some());
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
            Err(Error::NotYet(why)) => {
                tracing::info!(?action, why, "waiting");
                self.failed = Some(Failed {
                    action: action.clone(),
                    retry_at: Instant::now() + NOT_YET_PAUSE,
                    in_a_row: 0,
                });
            }
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
        // A new declaration is kept at once (a rotated password works within seconds), else
        // every SLOT_SYNC_EVERY.
        let declaration_changed = self.declared.has_changed().unwrap_or(false)
            || (self.verifiers.as_ref()).is_some_and(|v| v.has_changed().unwrap_or(false));
        if !declaration_changed
            && self
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
        let roles_kept = self.machine_roles_kept.clone();
        let events = self.events.clone();
        let declared = self.declared.borrow_and_update().clone();
        let verifiers = (self.verifiers.as_mut()).and_then(|v| v.borrow_and_update().clone());
        let state = self.state.clone();
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
            let roles = crate::roles::keep_machine_roles(&ctx, &roles_kept, verifiers.as_ref());
            match tokio::time::timeout(SLOT_SYNC_EVERY, roles).await {
                Ok(Ok(changed)) => {
                    for role in changed {
                        tracing::info!(
                            role,
                            "the role's password set to the one its Secret declares"
                        );
                        let note =
                            format!("role {role}'s password set to the one its Secret declares");
                        events.normal("PasswordDeclared", "SetPassword", note);
                    }
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "keeping the machine roles"),
                Err(_) => tracing::warn!("keeping the machine roles timed out"),
            }
            if let Some(document) = declared {
                keep_declared(&ctx, &document, &events, &state).await;
            }
            crate::in_place::statistics::start_if_pending(&ctx);
        }));
    }

    fn set_role(&self, role: Role) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.role = role;
    }

    fn set_restore_error(&self, error: Option<String>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.restore_error = error;
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

/// How long one pass over the declared roles and databases may take (a `CREATE DATABASE` or
/// `CREATE EXTENSION` can take a while); the slot sync waits for it.
const DECLARED_PASS_TIMEOUT: Duration = Duration::from_secs(60);

/// One pass over the declaration (`declared`): an Event per change, each object's state in
/// `/status`.
async fn keep_declared(
    ctx: &Context,
    document: &tusk_contract::declared::Document,
    events: &Events,
    state: &SharedState,
) {
    match tokio::time::timeout(DECLARED_PASS_TIMEOUT, crate::declared::keep(ctx, document)).await {
        Ok(Ok(pass)) => {
            for change in pass.changes {
                tracing::info!(reason = change.reason, "{}", change.note);
                match change.warning {
                    true => events.warning(change.reason, "Declare", change.note),
                    false => events.normal(change.reason, "Declare", change.note),
                }
            }
            for failed in pass.states.iter().filter(|s| s.state == "Failed") {
                tracing::warn!(kind = failed.kind, name = failed.name, message = ?failed.message, "a declared object could not be kept");
            }
            let json = serde_json::to_vec(document).unwrap_or_default();
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            state.declared = pass.states;
            state.declared_digest = Some(tusk_contract::declared::digest(&json));
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "keeping the declared roles and databases"),
        Err(_) => tracing::warn!("keeping the declared roles and databases timed out"),
    }
}
