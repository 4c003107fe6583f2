//! The manager's loop: every tick it looks at the Lease (as the role source last saw it) and
//! the local postmaster, asks [`decide`] what to do, and does it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::config::RunArgs;
use crate::context::Context;
use crate::data_lock::DataLock;
use crate::decide::{Action, Local, Upstream, decide};
use crate::error::Error;
use crate::events::Events;
use crate::pgdata;
use crate::postmaster::{Listen, Postmaster};
use crate::reaper::Reaper;
use crate::report::{ManagerState, Role, SharedState};
use crate::rewind::Rejoined;
use crate::role_source::{self, Observed, RoleSource};

const TICK: Duration = Duration::from_millis(250);
const SLOT_SYNC_EVERY: Duration = Duration::from_secs(5);
/// Pause after a failed step, so a broken peer or config is not hammered every tick.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

struct Supervisor {
    ctx: Arc<Context>,
    state: SharedState,
    observed: watch::Receiver<Observed>,
    /// The release request to the role source: the final LSN once demoted in a switchover.
    release: watch::Sender<Option<String>>,
    events: Events,
    postmaster: Option<Postmaster>,
    fenced: bool,
    last_slot_sync: Option<Instant>,
    slot_sync: Option<tokio::task::JoinHandle<()>>,
    /// Postmasters in a row that exited within [`SHORT_LIFE`] of their start.
    short_lives: u32,
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
    let (observed, release) =
        role_source::spawn(source, args.pod_name.clone(), args.renew_interval());
    let ctx = Arc::new(Context::new(args, reaper)?);
    if let Some(number) = ctx.args.preferred_sync_number().map_err(Error::Config)? {
        crate::preferred_sync::spawn(ctx.clone(), observed.clone(), number);
    }
    let state: SharedState = Arc::new(Mutex::new(ManagerState::default()));
    crate::http::serve(ctx.clone(), state.clone()).await?;
    let mut sup = Supervisor {
        ctx,
        state,
        observed,
        release,
        events,
        postmaster: None,
        fenced: false,
        last_slot_sync: None,
        short_lives: 0,
        slot_sync: None,
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
    if let Some(pm) = sup.postmaster.take() {
        // Fast shutdown: disconnect clients, checkpoint, exit.
        let status = pm.stop(libc::SIGINT, Duration::from_secs(120)).await;
        tracing::info!(%status, "postmaster stopped");
    }
    Ok(())
}

impl Supervisor {
    async fn step(&mut self) {
        if let Some(pm) = &mut self.postmaster
            && let Some(status) = pm.exited()
        {
            tracing::warn!(%status, "postmaster exited");
            if !self.fenced {
                let note = format!("PostgreSQL exited ({status}); the manager decides its restart");
                self.events.warning("PostgreSQLExited", "Restart", note);
            }
            self.short_lives = if pm.started.elapsed() < SHORT_LIFE {
                self.short_lives.saturating_add(1)
            } else {
                0
            };
            self.postmaster = None;
            self.publish(None);
            if self.short_lives > 0 {
                let pause = Duration::from_millis(250) * 2u32.pow(self.short_lives.min(6) - 1);
                tokio::time::sleep(pause).await;
            }
        }
        let observed = self.observed.borrow().clone();
        self.withdraw_release(&observed);
        let local = self.local();
        let action = decide(
            observed.lease.as_ref(),
            self.ctx.me(),
            Instant::now(),
            observed.last_renew,
            &local,
        );
        self.publish(Some(&observed));
        // A demoted holder repeats Demote until its release is written: logged once.
        let releasing = action == Action::Demote && self.release.borrow().is_some();
        if action != Action::Wait && !releasing {
            tracing::info!(?action, ?local, "acting");
        }
        if let Err(e) = self.execute(&action).await {
            tracing::error!(?action, error = %e, "step failed");
            self.publish(Some(&observed));
            tokio::time::sleep(RETRY_PAUSE).await;
            return;
        }
        // Slots once the server has had a moment to accept connections.
        let settled = self
            .postmaster
            .as_ref()
            .is_some_and(|pm| pm.started.elapsed() > SHORT_LIFE);
        if action == Action::Wait && local == Local::Primary && settled {
            self.sync_slots(&observed);
        }
        self.publish(Some(&observed));
    }

    fn local(&self) -> Local {
        let pgdata = self.ctx.pgdata();
        match &self.postmaster {
            Some(pm) if pm.standby => Local::Standby {
                upstream: pm.upstream.clone(),
            },
            Some(_) => Local::Primary,
            None if !pgdata::initialized(pgdata) => Local::NoData,
            None => Local::Stopped {
                standby: pgdata::is_standby(pgdata),
            },
        }
    }

    async fn execute(&mut self, action: &Action) -> Result<(), Error> {
        let ctx = self.ctx.clone();
        match action {
            Action::Wait => {}
            Action::Initdb => {
                self.set_role(Role::Initializing);
                pgdata::initdb(&ctx).await?;
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
                pgdata::clone_from(&ctx, from).await?;
                let note = format!("cloned from {from} with pg_basebackup");
                self.events.normal("Cloned", "Clone", note);
            }
            Action::Rewind { from } => {
                self.set_role(Role::Initializing);
                match crate::rewind::rejoin(&ctx, from).await? {
                    Rejoined::Rewound => {
                        let note = format!("rewound with pg_rewind to follow {from}");
                        self.events.normal("Rewound", "Rejoin", note);
                    }
                    Rejoined::Recloned => {
                        let note = format!(
                            "pg_rewind failed: moved the data directory aside and cloned {from} \
                             again"
                        );
                        self.events.warning("Recloned", "Rejoin", note);
                    }
                }
            }
            Action::Promote => {
                if let Some(pm) = &mut self.postmaster {
                    pm.wait_ready(&ctx, Duration::from_secs(120)).await?;
                    let started = Instant::now();
                    crate::promote::promote(&ctx).await?;
                    pm.standby = false;
                    pm.upstream = None;
                    self.last_slot_sync = None;
                    tracing::info!(took = ?started.elapsed(), "promoted");
                    let note = format!(
                        "promoted to primary: this pod holds the Lease ({:.2}s)",
                        started.elapsed().as_secs_f64()
                    );
                    self.events.normal("Promoted", "Promote", note);
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
            Action::Demote => {
                if self.release.borrow().is_none() {
                    let lsn = crate::demote::demote(&ctx, self.postmaster.take()).await?;
                    self.publish(None);
                    tracing::info!(final_lsn = lsn, "demoted: releasing the Lease");
                    let note = format!(
                        "shut down cleanly for a switchover; releasing the Lease at final LSN {lsn}"
                    );
                    self.events.normal("Demoted", "Switchover", note);
                    self.release.send_replace(Some(lsn));
                }
            }
            Action::Fence => {
                self.fenced = true;
                if let Some(pm) = self.postmaster.take() {
                    let status = pm.stop(libc::SIGQUIT, Duration::from_secs(10)).await;
                    tracing::warn!(%status, "fenced: postmaster stopped immediately");
                    let note = "stopped PostgreSQL immediately: this pod may not run as primary \
                                (the Lease is another's, or was not renewed in time)"
                        .to_owned();
                    self.events.warning("Fenced", "Fence", note);
                }
                // Only now: /status says `fenced` once the postmaster is gone, not before.
                self.publish(None);
            }
        }
        Ok(())
    }

    /// A release request outlives its switchover only until the Lease no longer asks for one
    /// (the operator aborted it, or the Lease has moved on): then the holder renews again.
    fn withdraw_release(&self, observed: &Observed) {
        let asked = observed.lease.as_ref().is_some_and(|lease| {
            lease.holder.as_deref() == Some(self.ctx.me()) && lease.switchover_to.is_some()
        });
        if !asked && self.release.borrow().is_some() {
            self.release.send_replace(None);
        }
    }

    fn start(&mut self, listen: Listen, upstream: Option<Upstream>) -> Result<(), Error> {
        let pm = Postmaster::start(&self.ctx, listen, upstream)?;
        self.postmaster = Some(pm);
        self.fenced = false;
        self.last_slot_sync = None;
        Ok(())
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
            let sync = crate::slots::sync(&ctx, &members);
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

    /// Publishes the role for /status: what runs, not what the Lease wishes.
    fn publish(&self, observed: Option<&Observed>) {
        let role = match &self.postmaster {
            _ if self.fenced => Role::Fenced,
            Some(pm) if pm.standby => Role::Replica,
            Some(_) => Role::Primary,
            None => Role::Stopped,
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.role = role;
        state.postgres_running = self.postmaster.is_some();
        state.fenced = self.fenced;
        if let Some(observed) = observed {
            state.lease_holder = observed.lease.as_ref().and_then(|l| l.holder.clone());
        }
    }
}
