//! Rejoin of a member that cannot follow the holder as it is: a former primary (diverged), or a
//! standby that stopped streaming (diverged in an asynchronous failover, or the WAL it needs is
//! gone). `pg_rewind` from the holder when it can work; otherwise the data directory is kept
//! aside and the member cloned again.
//!
//! What is retried and what re-clones: an error before pg_rewind touched anything that is about
//! the connection (the holder restarting, a network blip) is retried later with the rest left
//! as it was; an error that no retry fixes (no common ancestor, another system) re-clones; and
//! an error after pg_rewind started changing files re-clones too, because PostgreSQL does not
//! support running pg_rewind again over an interrupted one. A mark outside PGDATA records a
//! rewind in progress, so one interrupted by a crash or a kill is never re-run either.

use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::Client;

use crate::context::Context;
use crate::decide::Upstream;
use crate::error::Error;
use crate::machine_roles::REWIND_USER;
use crate::pgdata::{
    PEER_KEEPALIVES, check_system, clone_from, move_aside, peer_conninfo, presenting,
    replication_certificate, write_passfile, write_standby_config,
};

/// How long pg_rewind may run before it is stopped (and the member cloned again).
const REWIND_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long the holder may take to say whether it can be rewound from.
const SOURCE_TIMEOUT: Duration = Duration::from_secs(15);

/// How a member rejoined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejoined {
    Rewound,
    /// Cloned again, with why; `kept`: where the previous data directory was kept, and
    /// `dropped`: an older kept copy removed to make room for it.
    Recloned {
        why: String,
        kept: Option<PathBuf>,
        dropped: Option<PathBuf>,
    },
}

/// Rejoins `from`. `stalled`: a standby that stopped streaming (with nothing to rewind, it is
/// cloned again: the WAL it needs is gone). `expected`: the cluster's system identifier.
pub async fn rejoin(
    ctx: &Context,
    from: &str,
    stalled: bool,
    expected: Option<&str>,
) -> Result<Rejoined, Error> {
    let mark = rewind_mark(ctx);
    if mark.exists() {
        let why = "an earlier pg_rewind was interrupted (re-running it is not supported)";
        return reclone(ctx, from, expected, why.to_owned()).await;
    }
    // Not ready is not a failed rewind: retried later, never a reason to re-clone.
    let ready = tokio::time::timeout(SOURCE_TIMEOUT, source_ready(ctx, from, expected)).await;
    ready
        .map_err(|_| Error::State(format!("{from} did not answer within {SOURCE_TIMEOUT:?}")))??;
    std::fs::write(&mark, b"").map_err(Error::io(format!("writing {}", mark.display())))?;
    match rewind(ctx, from).await {
        Ok(output) if stalled && output.contains("no rewind required") => {
            remove_mark(&mark)?;
            let why = "it stopped streaming and has nothing to rewind: the WAL it needs is gone";
            reclone(ctx, from, expected, why.to_owned()).await
        }
        Ok(_) => {
            write_standby_config(ctx, &Upstream::named(from))?;
            remove_mark(&mark)?;
            Ok(Rejoined::Rewound)
        }
        Err(error) => match classify(&error) {
            Failure::Transient => {
                // pg_rewind changed nothing: the data is as it was, and the next try may work.
                remove_mark(&mark)?;
                Err(error)
            }
            Failure::Permanent => {
                tracing::warn!(from, error = %error, "pg_rewind cannot work: cloning again");
                reclone(ctx, from, expected, format!("pg_rewind failed: {error}")).await
            }
        },
    }
}

/// Keeps the data directory aside and clones `from` again.
pub async fn reclone(
    ctx: &Context,
    from: &str,
    expected: Option<&str>,
    why: String,
) -> Result<Rejoined, Error> {
    let aside = move_aside(ctx.pgdata())?;
    let _ = std::fs::remove_file(rewind_mark(ctx));
    clone_from(ctx, from, expected).await?;
    Ok(Rejoined::Recloned {
        why,
        kept: aside.kept,
        dropped: aside.dropped,
    })
}

/// `<PGDATA>.tusk-rewinding`: beside PGDATA, so neither a clone nor a rewind copies or
/// removes it.
fn rewind_mark(ctx: &Context) -> PathBuf {
    let mut path = ctx.pgdata().as_os_str().to_owned();
    path.push(".tusk-rewinding");
    PathBuf::from(path)
}

fn remove_mark(mark: &std::path::Path) -> Result<(), Error> {
    match std::fs::remove_file(mark) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("removing {}", mark.display()))(e)),
    }
}

/// Whether a failed rewind may be retried as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Transient,
    Permanent,
}

fn classify(error: &Error) -> Failure {
    let Error::Tool { stderr, .. } = error else {
        // The mark could not be written, the reaper stopped: nothing was changed.
        return Failure::Transient;
    };
    classify_stderr(stderr)
}

/// pg_rewind's own account: once it reports rewinding, files may have changed; before that, a
/// connection problem is worth another try and anything else is not.
fn classify_stderr(stderr: &str) -> Failure {
    if stderr.contains("rewinding from last common checkpoint") {
        return Failure::Permanent;
    }
    let connection = [
        "could not connect",
        "connection to server",
        "server closed the connection",
        "Connection refused",
        "timeout expired",
        "could not translate host name",
        "the database system is starting up",
        "the database system is shutting down",
    ];
    if connection.iter().any(|c| stderr.contains(c)) {
        Failure::Transient
    } else {
        Failure::Permanent
    }
}

/// pg_rewind reads the source's timeline from its control file. The Lease can name the new
/// holder before it has promoted and checkpointed (checkpoint.rs); rewinding from it then finds
/// "the same timeline", rewinds nothing, and the former primary can never follow. So the source
/// must be out of recovery with its last checkpoint on its current timeline — and be this
/// cluster's database system.
async fn source_ready(ctx: &Context, from: &str, expected: Option<&str>) -> Result<(), Error> {
    let client = connect_peer(ctx, from).await?;
    let row = client
        .query_one(
            "SELECT pg_is_in_recovery(), \
               (SELECT timeline_id FROM pg_control_checkpoint())::int8, \
               CASE WHEN pg_is_in_recovery() THEN NULL ELSE \
                 ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END, \
               (SELECT system_identifier::text FROM pg_control_system())",
            &[],
        )
        .await
        .map_err(Error::sql(format!("reading {from}'s timeline")))?;
    let (in_recovery, checkpointed, current, system): (bool, Option<i64>, Option<i64>, String) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    if let Some(expected) = expected.filter(|e| *e != system) {
        return Err(Error::State(format!(
            "{from} serves database system {system}, not this cluster's {expected}: refusing to \
             follow it"
        )));
    }
    if in_recovery || current.is_none() || checkpointed != current {
        return Err(Error::NotYet(format!(
            "{from} is not yet a primary with a checkpoint on its timeline: not rewinding yet"
        )));
    }
    Ok(())
}

/// Runs pg_rewind from `from`; returns what it printed.
async fn rewind(ctx: &Context, from: &str) -> Result<String, Error> {
    write_passfile(ctx)?;
    // The rewind role, with the replication role's certificate (pg_hba.conf: verify-ca).
    let mut extra = vec![("user", REWIND_USER), ("dbname", "postgres")];
    extra.extend(PEER_KEEPALIVES);
    let certificate = replication_certificate(ctx);
    extra.extend(certificate.as_ref().map_or(Vec::new(), presenting));
    let source = peer_conninfo(ctx, from, &extra);
    tracing::info!(from, "rewinding with pg_rewind");
    let mut cmd = ctx.tool("pg_rewind");
    // After a fence (immediate stop) pg_rewind first runs crash recovery in single-user mode.
    cmd.arg("--target-pgdata")
        .arg(ctx.pgdata())
        .arg(format!("--source-server={source}"));
    let out = ctx
        .reaper
        .run_bounded(cmd, "pg_rewind", REWIND_TIMEOUT)
        .await?;
    let printed = out.stderr.trim().to_string();
    tracing::info!(output = printed, "pg_rewind done");
    check_system(ctx.pgdata(), None, from)?;
    Ok(printed)
}

/// Connects as the rewind role to database `postgres` of member `peer`'s server over the
/// network (the questions before a rewind; the superuser never leaves the socket): TLS
/// verified against the cluster's CA (read at every call, so a rotated CA is used at once) and
/// by name, the replication role's client certificate presented when Tusk issued one, channel
/// binding required.
pub async fn connect_peer(ctx: &Context, peer: &str) -> Result<Client, Error> {
    let (host, port) = ctx.peers.address(peer);
    let certificate = replication_certificate(ctx);
    let identity = certificate
        .as_ref()
        .map(|(cert, key)| tusk_pgtls::Identity {
            cert: std::path::Path::new(cert),
            key: std::path::Path::new(key),
        });
    let tls = tusk_pgtls::verifying_as(&ctx.args.ca_file, identity)?;
    let mut config = tokio_postgres::Config::new();
    config
        .host(&host)
        .port(port)
        .user(REWIND_USER)
        .password(&ctx.args.replication_password)
        .dbname("postgres")
        .application_name("tusk-instance")
        .connect_timeout(Duration::from_secs(3));
    tusk_pgtls::connect(&config, Some(tls), "peer")
        .await
        .map_err(Error::sql(format!("connecting to {peer}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_trouble_before_rewinding_is_retried_and_the_rest_reclones() {
        let refused = "pg_rewind: error: connection to server at \"10.0.0.1\", port 5432 \
                       failed: Connection refused";
        assert_eq!(classify_stderr(refused), Failure::Transient);
        let no_ancestor = "pg_rewind: error: could not find common ancestor of the source and \
                           target cluster's timelines";
        assert_eq!(classify_stderr(no_ancestor), Failure::Permanent);
        let midway = "pg_rewind: rewinding from last common checkpoint at 0/3000060 on \
                      timeline 1\npg_rewind: error: server closed the connection unexpectedly";
        assert_eq!(
            classify_stderr(midway),
            Failure::Permanent,
            "files may have changed"
        );
    }
}
