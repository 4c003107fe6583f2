//! The postmaster as a child of the manager: started with the ConfigMap's `config_file` and
//! the overrides the manager owns, stopped fast (SIGINT) on shutdown or immediately (SIGQUIT)
//! when fencing.

use std::io::BufRead;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::decide::Upstream;
use crate::error::Error;
use crate::reaper::{Spawned, send_signal};

pub struct Postmaster {
    pub pid: i32,
    exit: tokio::sync::oneshot::Receiver<ExitStatus>,
    /// Started as a standby (and not promoted since).
    pub standby: bool,
    /// Whom the standby was told to stream from.
    pub upstream: Option<Upstream>,
    pub started: Instant,
}

/// How the postmaster listens: normally as configured; during bootstrap only on the socket.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    Configured,
    SocketOnly,
}

/// The last FATAL or PANIC line a watched postmaster wrote (every line still reaches the pod's
/// log): why a recovery stopped, for the restore's error and so the cluster's condition.
#[derive(Clone, Default)]
pub struct LastFatal {
    line: Arc<Mutex<Option<String>>>,
    /// Notified when the server's stderr closed: every line has been read.
    closed: Arc<tokio::sync::Notify>,
}

impl LastFatal {
    pub fn get(&self) -> Option<String> {
        self.line.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits (at most `limit`) until the server's stderr has closed, then the last line.
    pub async fn after_close(&self, limit: Duration) -> Option<String> {
        let _ = tokio::time::timeout(limit, self.closed.notified()).await;
        self.get()
    }

    /// Passes `stderr`'s lines on to ours, remembering the last FATAL or PANIC message.
    fn watch(&self, stderr: std::process::ChildStderr) {
        let (last, closed) = (self.line.clone(), self.closed.clone());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                eprintln!("{line}");
                let at = line.find("FATAL:  ").or_else(|| line.find("PANIC:  "));
                if let Some(at) = at {
                    *last.lock().unwrap_or_else(|e| e.into_inner()) = Some(line[at..].to_owned());
                }
            }
            closed.notify_one();
        });
    }
}

impl Postmaster {
    pub fn start(ctx: &Context, listen: Listen, upstream: Option<Upstream>) -> Result<Self, Error> {
        Self::spawn(ctx, listen, upstream, None)
    }

    /// [`Postmaster::start`], keeping the server's last FATAL or PANIC line in `fatal`.
    pub fn start_watched(ctx: &Context, listen: Listen, fatal: &LastFatal) -> Result<Self, Error> {
        Self::spawn(ctx, listen, None, Some(fatal))
    }

    fn spawn(
        ctx: &Context,
        listen: Listen,
        upstream: Option<Upstream>,
        fatal: Option<&LastFatal>,
    ) -> Result<Self, Error> {
        crate::preferred_sync::drop_stale(ctx.pgdata())?;
        let mut cmd = ctx.tool("postgres");
        cmd.arg("-D").arg(ctx.pgdata());
        if let Some(conf) = &ctx.args.config_file {
            cmd.arg("-c").arg(format!("config_file={}", conf.display()));
        }
        cmd.arg("-c")
            .arg(format!("port={}", ctx.args.pg_port))
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                ctx.args.socket_dir.display()
            ))
            // A crashed backend brings the postmaster down instead of a silent reinit: the
            // manager restarts it, and only while the Lease still says so.
            .arg("-c")
            .arg("restart_after_crash=off");
        if listen == Listen::SocketOnly {
            cmd.arg("-c").arg("listen_addresses=");
        }
        cmd.stdin(Stdio::null());
        if fatal.is_some() {
            cmd.stderr(Stdio::piped());
        }
        let Spawned {
            pid,
            exit,
            mut child,
        } = ctx.reaper.spawn(&mut cmd, "postgres")?;
        if let (Some(fatal), Some(stderr)) = (fatal, child.stderr.take()) {
            fatal.watch(stderr);
        }
        tracing::info!(pid, standby = upstream.is_some(), "postmaster started");
        Ok(Postmaster {
            pid,
            exit,
            standby: ctx.pgdata().join("standby.signal").exists(),
            upstream,
            started: Instant::now(),
        })
    }

    /// The exit status, once the postmaster has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        match self.exit.try_recv() {
            Ok(status) => Some(status),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => None,
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                Some(std::os::unix::process::ExitStatusExt::from_raw(0))
            }
        }
    }

    pub fn reload(&self) {
        send_signal(self.pid, libc::SIGHUP);
    }

    /// Sends `signal` without waiting: SIGINT starts a fast shutdown that later ticks follow.
    pub fn signal(&self, signal: i32) {
        send_signal(self.pid, signal);
    }

    /// Sends `signal` (SIGINT: fast, SIGQUIT: immediate) and waits for the exit; after
    /// `timeout` the postmaster is killed.
    pub async fn stop(mut self, signal: i32, timeout: Duration) -> ExitStatus {
        send_signal(self.pid, signal);
        match tokio::time::timeout(timeout, &mut self.exit).await {
            Ok(Ok(status)) => status,
            Ok(Err(_)) => std::os::unix::process::ExitStatusExt::from_raw(0),
            Err(_) => {
                tracing::warn!(pid = self.pid, "postmaster did not stop in time: SIGKILL");
                send_signal(self.pid, libc::SIGKILL);
                (&mut self.exit)
                    .await
                    .unwrap_or_else(|_| std::os::unix::process::ExitStatusExt::from_raw(0))
            }
        }
    }

    /// Waits until the server accepts connections on its socket, failing if it exits.
    pub async fn wait_ready(&mut self, ctx: &Context, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Err(Error::State(format!(
                    "postmaster exited during startup ({status})"
                )));
            }
            if crate::sql::connect(ctx, "postgres").await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::State(format!(
                    "postmaster not accepting connections after {timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
