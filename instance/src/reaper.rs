//! PID-1 child handling. One reaper calls `waitpid(-1)` for the whole process and hands each
//! exit status to whoever spawned that pid; anything else is an orphan (a backend left behind
//! by a killed postmaster, say) and is just reaped. Children are therefore spawned only through
//! [`Reaper::spawn`] (never `tokio::process`, whose own `waitpid` would race ours), with the
//! registry locked across `spawn` so the reaper cannot collect a pid before it is registered.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::error::Error;

#[derive(Default)]
pub struct Reaper {
    waiting: Mutex<HashMap<i32, oneshot::Sender<ExitStatus>>>,
}

/// A spawned child: its pid and, once it exits, its status.
pub struct Spawned {
    pub pid: i32,
    pub exit: oneshot::Receiver<ExitStatus>,
    pub child: std::process::Child,
}

/// What a finished tool printed.
pub struct ToolOutput {
    pub stdout: String,
    pub stderr: String,
}

impl Reaper {
    /// Starts reaping; outside PID 1 (tests) the manager becomes a child subreaper so orphans
    /// of its postmaster come to it just as they would in the container.
    pub fn start() -> Result<Arc<Reaper>, Error> {
        // SAFETY: prctl with integer arguments has no memory effects.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
            .map_err(Error::io("installing the SIGCHLD handler"))?;
        let reaper = Arc::new(Reaper::default());
        let me = reaper.clone();
        tokio::spawn(async move {
            loop {
                // SIGCHLDs coalesce: a periodic sweep catches any that were merged.
                let _ = tokio::time::timeout(Duration::from_secs(1), sigchld.recv()).await;
                me.reap();
            }
        });
        Ok(reaper)
    }

    fn reap(&self) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes only into `status`.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            match waiting.remove(&pid) {
                Some(tx) => {
                    let _ = tx.send(ExitStatus::from_raw(status));
                }
                None => tracing::debug!(pid, "reaped an orphan"),
            }
        }
    }

    pub fn spawn(&self, cmd: &mut Command, what: &str) -> Result<Spawned, Error> {
        // No child inherits a password: the postmaster passes its environment to every
        // backend, and anything running as the postgres user could read it from /proc.
        for name in crate::config::SECRET_VARIABLES {
            cmd.env_remove(name);
        }
        self.spawn_stripped(cmd, what)
    }

    /// Spawns `cmd` with only the environment it was given: for a tool that must hold
    /// credentials (the restore's backup agent), which it gets explicitly, never inherited.
    fn spawn_stripped(&self, cmd: &mut Command, what: &str) -> Result<Spawned, Error> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let child = cmd.spawn().map_err(Error::io(format!("starting {what}")))?;
        let pid = child.id() as i32;
        let (tx, exit) = oneshot::channel();
        waiting.insert(pid, tx);
        Ok(Spawned { pid, exit, child })
    }

    /// Runs a tool to completion, capturing its output; a non-zero exit is an error carrying
    /// its stderr.
    pub async fn run(&self, cmd: Command, tool: &str) -> Result<ToolOutput, Error> {
        self.run_within(cmd, tool, None).await
    }

    /// [`Reaper::run`], stopping the tool (SIGTERM, then SIGKILL) once it has run for
    /// `timeout`: no tool may hold the supervisor's step for ever.
    pub async fn run_bounded(
        &self,
        cmd: Command,
        tool: &str,
        timeout: Duration,
    ) -> Result<ToolOutput, Error> {
        self.run_within(cmd, tool, Some(timeout)).await
    }

    /// [`Reaper::run_bounded`] of a tool whose environment is exactly `env` (and nothing of
    /// the manager's): how credentials reach the one child that needs them.
    pub async fn run_with_env(
        &self,
        mut cmd: Command,
        tool: &str,
        env: &[(String, String)],
        timeout: Duration,
    ) -> Result<ToolOutput, Error> {
        cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
        self.run_prepared(cmd, tool, Some(timeout), false).await
    }

    async fn run_within(
        &self,
        cmd: Command,
        tool: &str,
        timeout: Option<Duration>,
    ) -> Result<ToolOutput, Error> {
        self.run_prepared(cmd, tool, timeout, true).await
    }

    async fn run_prepared(
        &self,
        mut cmd: Command,
        tool: &str,
        timeout: Option<Duration>,
        strip: bool,
    ) -> Result<ToolOutput, Error> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut spawned = if strip {
            self.spawn(&mut cmd, tool)?
        } else {
            self.spawn_stripped(&mut cmd, tool)?
        };
        let pid = spawned.pid;
        let stdout = read_all(spawned.child.stdout.take());
        let stderr = read_all(spawned.child.stderr.take());
        let limit = timeout.unwrap_or(Duration::MAX);
        let status = match tokio::time::timeout(limit, &mut spawned.exit).await {
            Ok(status) => status,
            Err(_) => {
                tracing::warn!(tool, pid, ?timeout, "stopping a tool that ran too long");
                send_signal(pid, libc::SIGTERM);
                match tokio::time::timeout(Duration::from_secs(10), &mut spawned.exit).await {
                    Ok(status) => status,
                    Err(_) => {
                        send_signal(pid, libc::SIGKILL);
                        (&mut spawned.exit).await
                    }
                }
            }
        }
        .map_err(|_| Error::State(format!("{tool}: the reaper stopped")))?;
        let output = ToolOutput {
            stdout: stdout.await.unwrap_or_default(),
            stderr: stderr.await.unwrap_or_default(),
        };
        if status.success() {
            Ok(output)
        } else {
            Err(Error::Tool {
                tool: tool.to_string(),
                status,
                stderr: output.stderr.trim().to_string(),
            })
        }
    }
}

fn read_all<R: std::io::Read + Send + 'static>(pipe: Option<R>) -> tokio::task::JoinHandle<String> {
    tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    })
}

/// Sends `signal` to `pid`; a process that is already gone is not an error.
pub fn send_signal(pid: i32, signal: i32) {
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(pid, signal) };
}
