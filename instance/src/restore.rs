//! A point-in-time restore on the holder's first start (issue 27, `docs/src/design/pitr.md` §5):
//! instead of initdb, the base backup is unpacked into the empty volume, PostgreSQL recovers
//! from the archive to the target and promotes itself there, and only then does the cluster's
//! life begin. Replicas clone from it as from any primary.
//!
//! The source's bucket, layout and credentials come as `RESTORE_`-prefixed variables (the
//! backup agent's own names behind the prefix). Only the backup agent the manager runs for the
//! restore gets them, unprefixed and with nothing else of the manager's environment; PostgreSQL
//! asks for each WAL file through `tusk-instance wal-fetch` and the manager's socket
//! ([`crate::restore_fetch`]), so no server process ever holds them.
//!
//! A marker beside PGDATA (`<PGDATA>.tusk-restore-pending`) is written first and removed last:
//! until then the data directory is not finished (`pgdata::initialized`), so a manager
//! restarted half-way resumes the restore, and never starts the half-restored data as a primary.

use std::path::PathBuf;
use std::time::Duration;

use crate::auto_conf::{self, write_private};
use crate::context::Context;
use crate::error::Error;
use crate::postmaster::{LastFatal, Listen, Postmaster};

/// Prefix of the variables that describe the restore's source store.
pub const SOURCE_PREFIX: &str = "RESTORE_";
/// The backup agent the init container installs beside the manager.
const DEFAULT_AGENT: &str = "/tusk/bin/backup-agent";
/// The target settings, one at most; none: the end of the archive.
const TARGETS: [(&str, &str); 4] = [
    ("TUSK_RESTORE_TARGET_TIME", "recovery_target_time"),
    ("TUSK_RESTORE_TARGET_LSN", "recovery_target_lsn"),
    ("TUSK_RESTORE_TARGET_XID", "recovery_target_xid"),
    ("TUSK_RESTORE_TARGET_NAME", "recovery_target_name"),
];
/// What a base backup read from a replica brings of the *source's* replication: its upstream
/// and slot in `postgresql.auto.conf`. A restored cluster carries nothing that points at
/// another cluster (its own manager writes its standbys' settings).
const SOURCE_STANDBY_KEYS: [&str; 2] = ["primary_conninfo", "primary_slot_name"];
/// Every key the restore writes into `postgresql.auto.conf`, and removes once promoted.
const RECOVERY_KEYS: [&str; 7] = [
    "restore_command",
    "recovery_target_time",
    "recovery_target_lsn",
    "recovery_target_xid",
    "recovery_target_name",
    "recovery_target_action",
    "recovery_target_timeline",
];
/// The variables that name and open a store (the backup agent's), as the operator sets them
/// for this cluster's own archive; a source's come with the `RESTORE_` prefix.
const STORE_VARIABLES: [&str; 14] = [
    "TUSK_STORE",
    "TUSK_BUCKET",
    "TUSK_PATH",
    "TUSK_NAMESPACE",
    "TUSK_CLUSTER",
    "TUSK_S3_ENDPOINT",
    "TUSK_S3_REGION",
    "TUSK_S3_FORCE_PATH_STYLE",
    "TUSK_S3_CA_BUNDLE",
    "TUSK_GCS_ENDPOINT",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "TUSK_GCS_KEY_JSON",
];
/// The base backup's download is bounded by the pod's patience, not ours: a day.
const UNPACK_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The backup agent: `TUSK_AGENT_BINARY`, else where the init container installs it.
pub fn agent_binary() -> PathBuf {
    let named = std::env::var("TUSK_AGENT_BINARY")
        .ok()
        .filter(|v| !v.is_empty());
    PathBuf::from(named.unwrap_or_else(|| DEFAULT_AGENT.to_owned()))
}

/// What to restore, read once from the manager's environment.
#[derive(Clone)]
pub struct RestorePlan {
    pub backup_id: String,
    /// `recovery_target_*` settings: one, or none for the end of the archive.
    pub target: Vec<(&'static str, String)>,
    /// The `backup-agent` binary.
    pub agent: PathBuf,
    /// This executable, PostgreSQL's `restore_command`.
    pub hook: PathBuf,
    /// The source store's variables, unprefixed: the agent's whole environment (with PATH).
    env: Vec<(String, String)>,
    /// This cluster's own archive, when it archives: where earlier incarnations' timelines are.
    own: Option<Vec<(String, String)>>,
}

impl RestorePlan {
    /// The plan `vars` describe: `None` without `TUSK_RESTORE_BACKUP_ID`.
    pub fn from_vars(vars: &[(String, String)]) -> Result<Option<Self>, Error> {
        let get = |name: &str| {
            vars.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let Some(backup_id) = get("TUSK_RESTORE_BACKUP_ID") else {
            return Ok(None);
        };
        let target: Vec<(&'static str, String)> = TARGETS
            .iter()
            .filter_map(|(var, key)| Some((*key, get(var)?)))
            .map(|(key, value)| match key {
                "recovery_target_time" => Ok((key, postgres_time(&value)?)),
                _ => Ok((key, value)),
            })
            .collect::<Result<_, Error>>()?;
        if target.len() > 1 {
            let names: Vec<&str> = target.iter().map(|(k, _)| *k).collect();
            return Err(Error::Config(format!(
                "a restore has one target, not {}",
                names.join(" and ")
            )));
        }
        let mut env: Vec<(String, String)> = vars
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(SOURCE_PREFIX)?.to_owned(), v.clone())))
            .collect();
        if !env.iter().any(|(k, _)| k == "TUSK_STORE") {
            return Err(Error::Config(
                "TUSK_RESTORE_BACKUP_ID is set but RESTORE_TUSK_STORE names no store to restore from"
                    .to_owned(),
            ));
        }
        let mut own: Vec<(String, String)> = vars
            .iter()
            .filter(|(k, _)| {
                STORE_VARIABLES.contains(&k.as_str()) || env.iter().any(|(name, _)| name == k)
            })
            .cloned()
            .collect();
        let archives = own.iter().any(|(k, _)| k == "TUSK_STORE");
        if let Some(path) = get("PATH") {
            env.push(("PATH".to_owned(), path.clone()));
            own.push(("PATH".to_owned(), path));
        }
        let agent = get("TUSK_AGENT_BINARY").unwrap_or_else(|| DEFAULT_AGENT.to_owned());
        let hook = std::env::current_exe()
            .map_err(|e| Error::Config(format!("locating this executable: {e}")))?;
        Ok(Some(Self {
            backup_id,
            target,
            agent: PathBuf::from(agent),
            hook,
            env,
            own: archives.then_some(own),
        }))
    }

    /// The agent's environment: the source store, PGDATA, and where the PostgreSQL tools are.
    pub fn agent_env(&self, ctx: &Context) -> Vec<(String, String)> {
        with_server(self.env.clone(), ctx)
    }

    /// The agent's environment for this cluster's own archive, when it archives.
    fn own_env(&self, ctx: &Context) -> Option<Vec<(String, String)>> {
        self.own.clone().map(|own| with_server(own, ctx))
    }

    /// The `postgresql.auto.conf` settings of the recovery, following `timeline`.
    fn recovery_settings(&self, timeline: u32) -> Vec<(&'static str, String)> {
        let mut settings = vec![
            (
                "restore_command",
                format!("{} wal-fetch %f %p", self.hook.display()),
            ),
            ("recovery_target_timeline", timeline.to_string()),
        ];
        if !self.target.is_empty() {
            settings.extend(self.target.iter().cloned());
            settings.push(("recovery_target_action", "promote".to_owned()));
        }
        settings
    }
}

/// `env` and where the server's data and tools are.
fn with_server(mut env: Vec<(String, String)>, ctx: &Context) -> Vec<(String, String)> {
    env.push(("PGDATA".to_owned(), ctx.pgdata().display().to_string()));
    if let Some(dir) = &ctx.args.pg_bin_dir {
        env.push(("TUSK_PG_BIN_DIR".to_owned(), dir.display().to_string()));
    }
    env
}

/// The timeline the recovery follows: the source's newest, as `recovery_target_timeline =
/// 'latest'` would find it (history files asked for from the base backup's timeline up, until
/// one is not in the source's archive), but named, so that PostgreSQL never follows a timeline
/// that only this cluster's own archive holds (`restore_fetch`).
async fn source_timeline(ctx: &Context, plan: &RestorePlan) -> Result<u32, Error> {
    let pgdata = ctx.pgdata();
    let label = std::fs::read_to_string(pgdata.join("backup_label")).unwrap_or_default();
    let mut newest = start_timeline(&label).unwrap_or(1);
    let probe = pgdata.join("pg_wal").join("RECOVERYHISTORY.tusk-probe");
    let env = plan.agent_env(ctx);
    loop {
        let name = format!("{:08X}.history", newest + 1);
        let fetched =
            crate::restore_fetch::wal_fetch(&ctx.reaper, &plan.agent, &env, &name, &probe)
                .await
                .map_err(|e| {
                    Error::State(format!("looking for {name} in the source's archive: {e}"))
                })?;
        match fetched {
            crate::restore_fetch::Fetched::Restored => newest += 1,
            crate::restore_fetch::Fetched::NotArchived => break,
        }
    }
    remove_file(&probe)?;
    Ok(newest)
}

/// `START TIMELINE: N` of a `backup_label`.
fn start_timeline(label: &str) -> Option<u32> {
    label
        .lines()
        .find_map(|line| line.strip_prefix("START TIMELINE:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Restores `plan` into the empty (or half-restored) PGDATA, recovers to the target and
/// promotes there, gives the roles this cluster's passwords, and stops the server cleanly.
pub async fn run(ctx: &Context, plan: &RestorePlan) -> Result<(), Error> {
    let pgdata = ctx.pgdata();
    let marker = crate::pgdata::restore_marker(pgdata);
    if !marker.exists() {
        write_private(&marker, plan.backup_id.as_bytes())?;
    }
    if !pgdata.join("PG_VERSION").exists() {
        crate::pgdata::clear(pgdata)?;
        tracing::info!(backup = %plan.backup_id, "unpacking the base backup");
        let mut cmd = std::process::Command::new(&plan.agent);
        cmd.args(["base-restore", "--backup-id", &plan.backup_id, "--pgdata"])
            .arg(pgdata);
        // A restore to a time starts from a backup completed by then, to an LSN from one
        // consistent by then (`latest`: the newest such).
        for (setting, flag) in [
            ("recovery_target_time", "--before"),
            ("recovery_target_lsn", "--before-lsn"),
        ] {
            if let Some((_, value)) = plan.target.iter().find(|(k, _)| *k == setting) {
                cmd.args([flag, value]);
            }
        }
        let env = plan.agent_env(ctx);
        ctx.reaper
            .run_with_env(cmd, "backup-agent base-restore", &env, UNPACK_TIMEOUT)
            .await?;
    }
    let spool = crate::restore_prefetch::spool_dir(pgdata);
    if already_promoted(pgdata) {
        // A manager stopped between the promotion and the end of the restore: replaying again
        // from the promoted data would never reach the target (and crash-loop on it).
        tracing::info!(backup = %plan.backup_id, "the restore had promoted already: finishing it");
        finish_promoted(ctx).await?;
    } else {
        forget_the_source_standby(pgdata)?;
        let timeline = source_timeline(ctx, plan).await?;
        auto_conf::set(pgdata, &RECOVERY_KEYS, &plan.recovery_settings(timeline))?;
        write_private(&pgdata.join("recovery.signal"), b"")?;
        // Files fetched ahead by an earlier attempt are valid (archived files never change),
        // but the spool is only ever this attempt's.
        remove_dir(&spool)?;
        let own = plan.own_env(ctx);
        let fetcher = crate::restore_fetch::serve(ctx, &plan.agent, plan.agent_env(ctx), own)?;
        let recovered = recover(ctx).await;
        fetcher.abort();
        recovered?;
    }
    remove_dir(&spool)?;
    auto_conf::remove(pgdata, &RECOVERY_KEYS)?;
    // PostgreSQL removes the signal file it recovered with; any other left behind would send
    // the next start back into recovery, now without a restore_command.
    remove_file(&pgdata.join("recovery.signal"))?;
    remove_file(&pgdata.join("standby.signal"))?;
    std::fs::remove_file(&marker).map_err(Error::io("removing the restore marker"))?;
    tracing::info!(backup = %plan.backup_id, "restore finished");
    Ok(())
}

/// A base backup read from a replica holds that replica's `standby.signal` and upstream. Left
/// in place, PostgreSQL would recover in standby mode (streaming from the source's primary if
/// it answers, and never ending recovery without a target) and, since it reads
/// `standby.signal` in preference to `recovery.signal`, remove only the former at its
/// promotion: the next start then met `recovery.signal` without a `restore_command` and
/// crash-looped. The restore is an archive recovery, nothing else.
fn forget_the_source_standby(pgdata: &std::path::Path) -> Result<(), Error> {
    remove_file(&pgdata.join("standby.signal"))?;
    auto_conf::remove(pgdata, &SOURCE_STANDBY_KEYS)?;
    Ok(())
}

/// `text`, a time with an offset (RFC 3339, or as PostgreSQL prints a `timestamptz`), as
/// `recovery_target_time` accepts it: PostgreSQL refuses `…Z` when it starts (time zone
/// abbreviations are not loaded yet then), so every accepted form becomes UTC with a numeric
/// offset. Microseconds are PostgreSQL's resolution; commit times have no finer digits, so
/// truncating keeps "every transaction committed by then".
pub fn postgres_time(text: &str) -> Result<String, Error> {
    let at: jiff::Timestamp = text.trim().parse().map_err(|e| {
        Error::Config(format!(
            "the restore target time {text:?} is not a time with an offset: {e}"
        ))
    })?;
    Ok(at.strftime("%Y-%m-%d %H:%M:%S%.6f+00").to_string())
}

fn remove_file(path: &std::path::Path) -> Result<(), Error> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("removing {}", path.display()))(e))
        }
        _ => Ok(()),
    }
}

fn remove_dir(dir: &std::path::Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("removing {}", dir.display()))(e))
        }
        _ => Ok(()),
    }
}

/// Whether the restore in `pgdata` got as far as PostgreSQL's promotion: the base backup's
/// `backup_label` was consumed when the recovery started, and the `recovery.signal` written
/// before every attempt is gone, which only the promotion (or this restore's own last steps,
/// after it) does.
fn already_promoted(pgdata: &std::path::Path) -> bool {
    pgdata.join("PG_VERSION").exists()
        && !pgdata.join("backup_label").exists()
        && !pgdata.join("recovery.signal").exists()
}

/// A promoted restore's last step, again: this cluster's passwords, on a server that listens
/// only on its socket.
async fn finish_promoted(ctx: &Context) -> Result<(), Error> {
    let mut server = Postmaster::start(ctx, Listen::SocketOnly, None)?;
    let adopted = match server.wait_ready(ctx, Duration::from_secs(600)).await {
        Ok(()) => crate::roles::adopt_roles(ctx).await,
        Err(e) => Err(e),
    };
    server.stop(libc::SIGINT, Duration::from_secs(120)).await;
    adopted
}

/// Runs the recovery on a server that listens only on its socket until it has promoted itself
/// at the target, then sets this cluster's passwords and stops it.
async fn recover(ctx: &Context) -> Result<(), Error> {
    let fatal = LastFatal::default();
    let mut server = Postmaster::start_watched(ctx, Listen::SocketOnly, &fatal)?;
    tracing::info!("recovering from the archive");
    loop {
        if let Some(status) = server.exited() {
            let last = fatal.after_close(Duration::from_secs(2)).await;
            let cause = last.map_or_else(
                || "PostgreSQL's log names the cause".to_owned(),
                |line| format!("PostgreSQL said {line:?}"),
            );
            return Err(Error::State(format!(
                "the recovery stopped ({status}) before promoting: {cause}"
            )));
        }
        if let Ok(client) = crate::sql::connect(ctx, "postgres").await
            && let Ok(row) = client.query_one("SELECT pg_is_in_recovery()", &[]).await
            && !row.get::<_, bool>(0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let adopted = crate::roles::adopt_roles(ctx).await;
    server.stop(libc::SIGINT, Duration::from_secs(120)).await;
    adopted
}

#[cfg(test)]
#[path = "restore_tests.rs"]
mod tests;
