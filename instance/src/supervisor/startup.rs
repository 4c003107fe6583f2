//! The manager's start and end: the checks before anything touches PGDATA, the tasks beside
//! the loop (role source, archiver, monitor, status port), the loop itself, and the fast
//! shutdown of the postmaster when the pod goes away.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use super::Supervisor;
use crate::config::RunArgs;
use crate::context::Context;
use crate::data_lock::DataLock;
use crate::error::Error;
use crate::events::Events;
use crate::planned_restart::PlannedRestart;
use crate::reaper::Reaper;
use crate::report::{ManagerState, SharedState};
use crate::role_source::{self, RoleSource};
use crate::streaming_clock::StreamingClock;
use crate::watchdog::Watchdog;

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
    // An in-place upgrade stopped half-way leaves the old directory unstartable until undone.
    if crate::in_place::run::undo_interrupted(&args.pgdata)? {
        tracing::warn!(
            pgdata = %args.pgdata.display(),
            "an in-place upgrade stopped before pg_upgrade finished: the old data directory is \
             whole again"
        );
    }
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
    // The declaration and the password verifiers, followed through the API (`declared::source`).
    let follow = |name: String| {
        let client = client.clone().filter(|_| !args.cluster.is_empty())?;
        let api = kube::Api::namespaced(client, &args.namespace);
        Some(crate::declared::source::follow(api, name))
    };
    let verifiers = follow(tusk_contract::roles::verifiers_secret_name(&args.cluster));
    let declared = match &args.declared_file {
        Some(path) => Some(crate::declared::Source::File(path.clone())),
        None => follow(tusk_contract::declared::secret_name(&args.cluster))
            .map(crate::declared::Source::Secret),
    };
    let declared = match declared {
        Some(source) => crate::declared::spawn(source),
        None => tokio::sync::watch::channel(None).1,
    };
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
    let archiver = crate::archive_socket::spawn(
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
        machine_roles_kept: Default::default(),
        declared,
        verifiers,
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
    // A fresh look at the Lease is acted on at once, not at the next tick: a switchover's
    // holder and target each learn their turn from it.
    let mut fresh = sup.observed.clone();
    // A signal also interrupts a step in progress (a clone, say): the pod is going away.
    loop {
        tokio::select! {
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            _ = async {
                tokio::select! {
                    () = tokio::time::sleep(sup.tick()) => {}
                    Ok(()) = fresh.changed() => {}
                }
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
