//! The throwaway PostgreSQL a verification restores into: initdb in a fresh directory under the
//! scratch dir, started as a child process that listens only on a Unix socket in that
//! directory (no TCP, `listen_addresses` empty; socket mode 0700 inside a 0700 directory, so
//! trust authentication admits only this user). Stopped and removed in every case: `stop`, or
//! `Drop` when the verification future is dropped (a signal, a panic).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::error::AgentError;
use crate::pg::{PgParams, SslMode};

/// The scratch server's superuser (the name clusters Tusk backs up use for theirs).
pub const SUPERUSER: &str = "postgres";
/// Only names the socket file (`.s.PGSQL.5432`): nothing listens on TCP.
const PORT: u16 = 5432;
/// The kernel's limit for a Unix socket path (`sun_path`), terminator included.
const MAX_SOCKET_PATH: usize = 107;

pub struct ScratchServer {
    /// Removed with everything in it when dropped.
    dir: tempfile::TempDir,
    bin_dir: Option<PathBuf>,
    child: Option<Child>,
}

impl ScratchServer {
    /// A fresh private directory under `parent` for a server, none running yet.
    pub fn create(
        parent: Option<&Path>,
        bin_dir: Option<PathBuf>,
    ) -> Result<ScratchServer, AgentError> {
        if running_as_root() {
            return Err(AgentError::Usage(
                "verify-restore must run as a non-root user: PostgreSQL refuses to run as root \
                 (in the postgres image, run as its postgres user, uid 999)"
                    .into(),
            ));
        }
        let builder = {
            let mut b = tempfile::Builder::new();
            b.prefix("tusk-verify-");
            b
        };
        let dir = match parent {
            Some(p) => builder.tempdir_in(p),
            None => builder.tempdir(),
        }
        .map_err(|e| AgentError::io("creating the scratch directory", e))?;
        let socket = dir.path().join(format!(".s.PGSQL.{PORT}"));
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(AgentError::Usage(format!(
                "the scratch directory's socket path {} is longer than {MAX_SOCKET_PATH} bytes: \
                 choose a shorter --scratch-dir",
                socket.display()
            )));
        }
        Ok(ScratchServer {
            dir,
            bin_dir,
            child: None,
        })
    }

    /// initdb + start under `parent` (the system temp dir when `None`), ready when it returns.
    pub async fn start(
        parent: Option<&Path>,
        bin_dir: Option<PathBuf>,
        startup_timeout: Duration,
    ) -> Result<ScratchServer, AgentError> {
        let mut server = Self::create(parent, bin_dir)?;
        server.initdb().await?;
        server.spawn(&[], &[])?;
        server.wait_ready(startup_timeout).await?;
        tracing::info!(dir = %server.dir.path().display(), "scratch server ready (Unix socket only)");
        Ok(server)
    }

    /// Starts the server on a data directory already put in [`Self::data_dir`] (a base
    /// backup), with `settings` and `env` added (recovery's); not waited for.
    pub fn start_on_data(
        &mut self,
        settings: &[String],
        env: &[(String, String)],
    ) -> Result<(), AgentError> {
        self.spawn(settings, env)
    }

    /// Connection parameters for the restore and the checks: the socket directory as host.
    pub fn params(&self, connect_timeout: Duration) -> PgParams {
        PgParams {
            host: self.dir.path().display().to_string(),
            port: PORT,
            user: SUPERUSER.into(),
            password: None,
            maintenance_db: "postgres".into(),
            bin_dir: self.bin_dir.clone(),
            connect_timeout,
            hostaddr: None,
            ssl_mode: SslMode::Disable,
            ssl_root_cert: None,
            client_certificate: None,
        }
    }

    /// Where the restore keeps its verified downloads (removed with the server).
    pub fn work_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Whether the postmaster still runs: a failure after it died is the environment's.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The end of the server's log, for errors.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    /// Immediate shutdown (the data is thrown away), then the directory is removed.
    pub async fn stop(mut self) {
        if let Some(mut child) = self.child.take() {
            let stopped = Command::new(self.tool("pg_ctl"))
                .args(["stop", "-m", "immediate", "-w", "-D"])
                .arg(self.data_dir())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await;
            if !stopped.is_ok_and(|s| s.success()) {
                let _ = child.start_kill();
            }
            let _ = child.wait().await;
        }
        tracing::info!(dir = %self.dir.path().display(), "scratch server stopped and removed");
    }

    fn tool(&self, name: &str) -> PathBuf {
        match &self.bin_dir {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    async fn initdb(&self) -> Result<(), AgentError> {
        // UTF8 without a locale exists in every image; databases restored with their own
        // locale get it from the backup (CREATE DATABASE … TEMPLATE template0).
        let out = Command::new(self.tool("initdb"))
            .arg("-D")
            .arg(self.data_dir())
            .args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-locale"])
            .arg("--no-sync")
            .output()
            .await
            .map_err(|e| {
                AgentError::io("running initdb (is the PostgreSQL server installed?)", e)
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(AgentError::Tool {
            tool: "initdb".into(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    fn spawn(&mut self, extra: &[String], env: &[(String, String)]) -> Result<(), AgentError> {
        let log = std::fs::File::create(self.log_path())
            .map_err(|e| AgentError::io("creating the scratch server's log", e))?;
        let socket_dir = self.dir.path().display().to_string();
        let mut cmd = Command::new(self.tool("postgres"));
        cmd.arg("-D").arg(self.data_dir());
        for setting in [
            "listen_addresses=".to_string(),
            format!("unix_socket_directories={socket_dir}"),
            "unix_socket_permissions=0700".into(),
            format!("port={PORT}"),
            // Throwaway data: durability buys nothing here, and costs restore time.
            "fsync=off".into(),
            "full_page_writes=off".into(),
            "synchronous_commit=off".into(),
            "autovacuum=off".into(),
        ]
        .iter()
        .chain(extra)
        {
            cmd.arg("-c").arg(setting);
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            // Last resort if neither stop nor Drop's pg_ctl ran.
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| AgentError::io("starting the scratch PostgreSQL", e))?;
        self.child = Some(child);
        Ok(())
    }

    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), AgentError> {
        let probe = self.params(Duration::ZERO);
        let deadline = Instant::now() + timeout;
        loop {
            if !self.is_running() {
                return Err(AgentError::Other(format!(
                    "the scratch PostgreSQL exited during startup: {}",
                    self.log_tail()
                )));
            }
            if probe.connect("postgres").await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(AgentError::Other(format!(
                    "the scratch PostgreSQL did not accept connections within {timeout:?}: {}",
                    self.log_tail()
                )));
            }
            // Polling the server's own socket: there is no readiness notification to wait on.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for ScratchServer {
    /// Reached without `stop` only when the verification was dropped mid-way: stop the server
    /// synchronously before the directory goes.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let stopped = std::process::Command::new(self.tool("pg_ctl"))
                .args(["stop", "-m", "immediate", "-w", "-D"])
                .arg(self.data_dir())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if !stopped.is_ok_and(|s| s.success()) {
                let _ = child.start_kill();
            }
        }
    }
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}
