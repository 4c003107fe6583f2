//! The PgBouncer process and its admin console, reached on the pod's own socket as
//! [`ini::ADMIN_USER`] with a password made at start that never leaves the pod's memory.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::process::{Child, Command};

use super::{PoolerArgs, ini};
use crate::error::Error;

pub struct Bouncer {
    child: Child,
    ini: PathBuf,
    socket_dir: PathBuf,
    port: u16,
    admin_password: String,
    /// The admin console sessions, kept open: each new one costs a SCRAM exchange, which
    /// would add to every client-visible pause. PAUSE has its own (it answers only once the
    /// transactions in flight are done).
    control: Option<tokio_postgres::Client>,
    pauser: Option<Arc<tokio_postgres::Client>>,
    /// A PAUSE not answered yet. PgBouncer never answers a PAUSE that a RESUME overtook, and
    /// a session stuck on one would hold every later PAUSE behind it: such a session is
    /// dropped at the RESUME, and the next pause opens another.
    pause_pending: Arc<AtomicBool>,
    /// How long a PAUSE is waited for at most (the pooler's pause limit).
    pause_limit: Duration,
}

/// 24 random bytes from the kernel, hex.
fn random_password() -> Result<String, Error> {
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(Error::io("reading /dev/urandom"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `text` to `path` (0600) through a temporary file, so PgBouncer never reads half.
fn write_private(path: &Path, text: &str) -> Result<(), Error> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(Error::io(format!("writing {}", tmp.display())))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .map_err(Error::io(format!("restricting {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(Error::io(format!("renaming to {}", path.display())))
}

impl Bouncer {
    /// Writes the configuration routed to `host` and starts PgBouncer in the foreground (its
    /// log on the pod's stderr).
    pub fn start(args: &PoolerArgs, host: &str) -> Result<Self, Error> {
        std::fs::create_dir_all(&args.run_dir)
            .map_err(Error::io(format!("creating {}", args.run_dir.display())))?;
        let admin_password = random_password()?;
        write_private(
            &args.run_dir.join("users.txt"),
            &ini::users(&admin_password),
        )?;
        write_private(&args.run_dir.join("hba.conf"), &ini::hba())?;
        let ini = args.run_dir.join("pgbouncer.ini");
        write_private(&ini, &ini::render(&args.settings(), Some(host)))?;
        let child = Command::new(&args.pgbouncer)
            .arg(&ini)
            .kill_on_drop(true)
            .spawn()
            .map_err(Error::io(format!("starting {}", args.pgbouncer.display())))?;
        Ok(Self {
            child,
            ini,
            socket_dir: args.run_dir.clone(),
            port: args.port,
            admin_password,
            control: None,
            pauser: None,
            pause_pending: Arc::new(AtomicBool::new(false)),
            pause_limit: Duration::from_secs(args.pause_limit_seconds),
        })
    }

    /// Opens both admin sessions as soon as PgBouncer listens (at most `limit`), so that the
    /// first switchover finds them open.
    pub async fn connect_admin(&mut self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if self.session().await.is_ok() && self.pause_session().await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::warn!("PgBouncer's admin console did not answer; it is tried again when needed");
    }

    async fn session(&mut self) -> Result<&tokio_postgres::Client, String> {
        if self.control.as_ref().is_none_or(|c| c.is_closed()) {
            self.control = Some(open(self.admin_config()).await?);
        }
        self.control
            .as_ref()
            .ok_or_else(|| "no admin session".to_owned())
    }

    async fn pause_session(&mut self) -> Result<Arc<tokio_postgres::Client>, String> {
        if self.pauser.as_ref().is_none_or(|c| c.is_closed()) {
            self.pauser = Some(Arc::new(open(self.admin_config()).await?));
        }
        self.pauser
            .clone()
            .ok_or_else(|| "no admin session".to_owned())
    }

    /// Rewrites the route to `host`, has PgBouncer read it, and closes the server connections
    /// to the old one as they are released (none is in use while paused).
    pub async fn route(&mut self, args: &PoolerArgs, host: &str) -> Result<(), Error> {
        write_private(&self.ini, &ini::render(&args.settings(), Some(host)))?;
        self.admin("RELOAD").await;
        self.admin("RECONNECT").await;
        Ok(())
    }

    /// PAUSE waits for the transactions in flight; it runs on its own admin connection so
    /// that the pooler can route and resume meanwhile.
    pub async fn pause(&mut self) {
        match self.pause_session().await {
            Ok(session) => {
                let (pending, limit) = (self.pause_pending.clone(), self.pause_limit);
                pending.store(true, Ordering::SeqCst);
                tokio::spawn(async move {
                    match tokio::time::timeout(limit, command(&session, "PAUSE")).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::warn!(error = e, "PgBouncer PAUSE"),
                        Err(_) => tracing::warn!("PgBouncer PAUSE unanswered: session dropped"),
                    }
                    pending.store(false, Ordering::SeqCst);
                });
            }
            Err(e) => tracing::warn!(error = e, "PgBouncer PAUSE: no admin session"),
        }
    }

    /// RELOAD: PgBouncer reads its configuration and certificate files again (with server
    /// TLS it also replaces its server connections, each once it is released).
    pub async fn reload(&mut self) {
        self.admin("RELOAD").await;
    }

    pub async fn resume(&mut self) {
        if self.pause_pending.swap(false, Ordering::SeqCst) {
            self.pauser = None;
            self.pause_pending = Arc::new(AtomicBool::new(false));
        }
        self.admin("RESUME").await;
    }

    async fn admin(&mut self, what: &str) {
        let result = match self.session().await {
            Ok(session) => command(session, what).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!(command = what, error = e, "PgBouncer admin console");
        }
    }

    /// The admin console's connection settings (also the metrics endpoint's).
    pub fn admin_config(&self) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host_path(&self.socket_dir)
            .port(self.port)
            .user(ini::ADMIN_USER)
            .password(&self.admin_password)
            .dbname("pgbouncer")
            .connect_timeout(Duration::from_secs(2));
        config
    }

    /// PgBouncer's exit.
    pub async fn exited(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => describe(status),
            Err(e) => e.to_string(),
        }
    }

    /// SIGINT: PgBouncer's safe shutdown (transactions in flight finish); then its exit.
    pub async fn shut_down(mut self) -> Result<(), Error> {
        if let Some(pid) = self.child.id().and_then(|pid| i32::try_from(pid).ok()) {
            // SAFETY: signalling our own child process.
            unsafe {
                libc::kill(pid, libc::SIGINT);
            }
        }
        let status = self
            .child
            .wait()
            .await
            .map_err(Error::io("waiting for PgBouncer"))?;
        tracing::info!(status = describe(status), "PgBouncer stopped");
        Ok(())
    }
}

fn describe(status: ExitStatus) -> String {
    status.to_string()
}

async fn open(config: tokio_postgres::Config) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(client)
}

async fn command(session: &tokio_postgres::Client, what: &str) -> Result<(), String> {
    session
        .simple_query(what)
        .await
        .map(|_| ())
        .map_err(|e| match e.as_db_error() {
            Some(db) => db.message().to_owned(),
            None => e.to_string(),
        })
}
