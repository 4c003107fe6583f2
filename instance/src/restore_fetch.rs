//! WAL for a restore's recovery: `tusk-instance wal-fetch %f %p` (PostgreSQL's
//! `restore_command`, holding no credentials) asks the manager over a socket, and the manager
//! runs the backup agent with the source store's credentials for that one file. The agent's
//! answer keeps its meaning: "not in the archive" only on a real not-found (the end of the
//! archive, or a history file that does not exist); any other failure stops the recovery
//! (exit 126) rather than letting PostgreSQL take it for the end and promote at the wrong point.
//! The manager then retries the whole step from where the recovery stood. The next segments
//! are fetched ahead (`restore_prefetch`).
//!
//! A history file the source does not hold is also looked for in this cluster's own archive:
//! a restored system keeps the source's identifier, so an earlier incarnation of this cluster
//! (restored before under the same name) archived its timelines beside where this one will.
//! PostgreSQL asks for those history files only to choose its new timeline at the promotion
//! (the recovery follows an explicit timeline, the source's newest: `restore.rs`), and so
//! takes one above every timeline any incarnation used: each archives its own files.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream as StdStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use backup_store::wal::WalName;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

use crate::context::Context;
use crate::error::Error;
use crate::restore_prefetch::{self, Prefetcher};

/// The socket's name in the socket directory.
const SOCKET: &str = ".tusk-restore.sock";
/// Longest request line: a command, a WAL name and a path.
const MAX_REQUEST: u64 = 8192;
/// One file's download, with the agent's own retries.
const FETCH_TIMEOUT: Duration = Duration::from_secs(600);
/// The hook's exit status when the file is not in the archive (PostgreSQL: "not available").
pub const NOT_ARCHIVED: u8 = 1;
/// The hook's exit status on any other failure: PostgreSQL stops the recovery.
pub const RECOVERY_MUST_STOP: u8 = 126;

pub fn socket_path(socket_dir: &Path) -> PathBuf {
    socket_dir.join(SOCKET)
}

/// What one request got.
#[derive(Debug, PartialEq, Eq)]
pub enum Fetched {
    Restored,
    NotArchived,
}

/// Serves fetches on the socket until the returned task is aborted, running `agent` with
/// exactly `env` (the source store's settings and credentials) for each file.
pub fn serve(
    ctx: &Context,
    agent: &Path,
    env: Vec<(String, String)>,
    own: Option<Vec<(String, String)>>,
) -> Result<JoinHandle<()>, Error> {
    let socket = socket_path(&ctx.args.socket_dir);
    let _ = std::fs::remove_file(&socket);
    let listener =
        UnixListener::bind(&socket).map_err(Error::io(format!("binding {}", socket.display())))?;
    let download = {
        let (reaper, agent, env) = (ctx.reaper.clone(), agent.to_owned(), env.clone());
        let download = move |name: String, path: PathBuf| {
            let (reaper, agent, env) = (reaper.clone(), agent.clone(), env.clone());
            let fetched = async move { wal_fetch(&reaper, &agent, &env, &name, &path).await };
            Box::pin(async move { matches!(fetched.await, Ok(Fetched::Restored)) })
                as futures::future::BoxFuture<'static, bool>
        };
        Arc::new(download) as restore_prefetch::Download
    };
    let spool = restore_prefetch::spool_dir(ctx.pgdata());
    let prefetcher = Prefetcher::new(spool.clone(), download)
        .map_err(Error::io(format!("creating {}", spool.display())))?;
    let fetcher = Arc::new(Fetcher {
        reaper: ctx.reaper.clone(),
        pgdata: ctx.pgdata().to_owned(),
        agent: agent.to_owned(),
        env,
        own,
        prefetcher: prefetcher.clone(),
    });
    Ok(tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(answer(stream, fetcher.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the restore socket failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }))
}

struct Fetcher {
    reaper: Arc<crate::reaper::Reaper>,
    pgdata: PathBuf,
    agent: PathBuf,
    env: Vec<(String, String)>,
    /// This cluster's own archive (its variables), when it archives.
    own: Option<Vec<(String, String)>>,
    prefetcher: Arc<Prefetcher>,
}

impl Fetcher {
    /// A file fetched ahead is handed over; any other is fetched now. Either way the segments
    /// after it are fetched ahead.
    async fn fetch(&self, request: &str) -> Result<Fetched, String> {
        let (name, path) = parse_request(request, &self.pgdata)?;
        let mut fetched = if self.prefetcher.take(name, path).await {
            Fetched::Restored
        } else {
            wal_fetch(&self.reaper, &self.agent, &self.env, name, path).await?
        };
        if let (Fetched::NotArchived, Some(own)) = (&fetched, &self.own)
            && name.ends_with(".history")
        {
            // A failure here stops the recovery too: a timeline chosen blind may collide.
            fetched = wal_fetch(&self.reaper, &self.agent, own, name, path).await?;
            if fetched == Fetched::Restored {
                tracing::info!(
                    file = name,
                    "a timeline an earlier incarnation used: passed over"
                );
            }
        }
        if fetched == Fetched::Restored {
            self.prefetcher.ahead_of(name, path);
        }
        Ok(fetched)
    }
}

/// One `backup-agent wal-fetch NAME PATH` with the source store's `env`.
pub async fn wal_fetch(
    reaper: &crate::reaper::Reaper,
    agent: &Path,
    env: &[(String, String)],
    name: &str,
    path: &Path,
) -> Result<Fetched, String> {
    let mut cmd = std::process::Command::new(agent);
    cmd.arg("wal-fetch").arg(name).arg(path);
    let run = reaper
        .run_with_env(cmd, "backup-agent wal-fetch", env, FETCH_TIMEOUT)
        .await;
    match run {
        Ok(_) => Ok(Fetched::Restored),
        Err(Error::Tool { status, .. }) if status.code() == Some(i32::from(NOT_ARCHIVED)) => {
            Ok(Fetched::NotArchived)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// `fetch <WAL name> <absolute path in PGDATA>`: anything else is refused, since the name goes
/// into a bucket key and the path is written to.
fn parse_request<'a>(request: &'a str, pgdata: &Path) -> Result<(&'a str, &'a Path), String> {
    let (name, path) = request
        .strip_prefix("fetch ")
        .and_then(|rest| rest.split_once(' '))
        .ok_or_else(|| format!("not a request: {request:?}"))?;
    WalName::parse(name).map_err(|e| e.to_string())?;
    let path = Path::new(path);
    let inside = path.is_absolute()
        && path.starts_with(pgdata)
        && !path
            .components()
            .any(|c| c == std::path::Component::ParentDir);
    if !inside {
        return Err(format!("{} is not in PGDATA", path.display()));
    }
    Ok((name, path))
}

async fn answer(stream: UnixStream, fetcher: Arc<Fetcher>) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let read = tokio::io::BufReader::new(read.take(MAX_REQUEST))
        .read_line(&mut line)
        .await;
    let reply = match read {
        Ok(_) => match fetcher.fetch(line.trim_end()).await {
            Ok(Fetched::Restored) => "ok restored".to_owned(),
            Ok(Fetched::NotArchived) => "ok not-archived".to_owned(),
            Err(why) => {
                tracing::warn!(request = line.trim_end(), error = %why, "a WAL fetch failed");
                format!("error {}", why.replace('\n', " "))
            }
        },
        Err(e) => format!("error reading the request: {e}"),
    };
    let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
}

/// The hook's side: asks for `name` into `path` (relative to the working directory, PGDATA).
pub fn request(name: &str, path: &Path, socket_dir: &Path) -> Result<Fetched, String> {
    let path = std::env::current_dir()
        .map_err(|e| format!("the working directory: {e}"))?
        .join(path);
    let path = path
        .to_str()
        .filter(|p| !p.contains('\n') && !name.contains(['\n', ' ']))
        .ok_or_else(|| format!("{} is not a path the manager takes", path.display()))?;
    let socket = socket_path(socket_dir);
    let failed = |what: &str, e: std::io::Error| format!("{what} {}: {e}", socket.display());
    let mut stream = StdStream::connect(&socket).map_err(|e| failed("connecting to", e))?;
    let timeout = Some(FETCH_TIMEOUT + Duration::from_secs(30));
    stream
        .set_read_timeout(timeout)
        .and_then(|()| stream.set_write_timeout(timeout))
        .map_err(|e| failed("configuring", e))?;
    stream
        .write_all(format!("fetch {name} {path}\n").as_bytes())
        .map_err(|e| failed("writing to", e))?;
    let mut reply = String::new();
    BufReader::new(stream)
        .read_line(&mut reply)
        .map_err(|e| failed("waiting for", e))?;
    match reply.trim_end() {
        "ok restored" => Ok(Fetched::Restored),
        "ok not-archived" => Ok(Fetched::NotArchived),
        other => Err(other.strip_prefix("error ").unwrap_or(other).to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wal_names_into_pgdata_are_fetched() {
        let pgdata = Path::new("/data/pgdata");
        let ok = parse_request(
            "fetch 000000010000000000000003 /data/pgdata/pg_wal/RECOVERYXLOG",
            pgdata,
        );
        assert_eq!(
            ok,
            Ok((
                "000000010000000000000003",
                Path::new("/data/pgdata/pg_wal/RECOVERYXLOG")
            ))
        );
        assert!(
            parse_request(
                "fetch 00000002.history /data/pgdata/pg_wal/RECOVERYHISTORY",
                pgdata
            )
            .is_ok()
        );
        for bad in [
            "fetch ../../etc/passwd /data/pgdata/x",
            "fetch 000000010000000000000003 /etc/cron.d/x",
            "fetch 000000010000000000000003 /data/pgdata/../x",
            "fetch 000000010000000000000003 pg_wal/RECOVERYXLOG",
            "push 000000010000000000000003 /data/pgdata/x",
            "fetch 000000010000000000000003",
        ] {
            assert!(parse_request(bad, pgdata).is_err(), "{bad} accepted");
        }
    }
}
