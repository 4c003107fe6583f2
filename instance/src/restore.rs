//! A point-in-time restore on the holder's first start (issue 27, `docs/pitr-design.md` §5):
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
use crate::postmaster::{Listen, Postmaster};

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
        if let Some(path) = get("PATH") {
            env.push(("PATH".to_owned(), path));
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
        }))
    }

    /// The agent's environment: the source store, PGDATA, and where the PostgreSQL tools are.
    pub fn agent_env(&self, ctx: &Context) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        env.push(("PGDATA".to_owned(), ctx.pgdata().display().to_string()));
        if let Some(dir) = &ctx.args.pg_bin_dir {
            env.push(("TUSK_PG_BIN_DIR".to_owned(), dir.display().to_string()));
        }
        env
    }

    /// The `postgresql.auto.conf` settings of the recovery.
    fn recovery_settings(&self) -> Vec<(&'static str, String)> {
        let mut settings = vec![
            (
                "restore_command",
                format!("{} wal-fetch %f %p", self.hook.display()),
            ),
            ("recovery_target_timeline", "latest".to_owned()),
        ];
        if !self.target.is_empty() {
            settings.extend(self.target.iter().cloned());
            settings.push(("recovery_target_action", "promote".to_owned()));
        }
        settings
    }
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
    forget_the_source_standby(pgdata)?;
    auto_conf::set(pgdata, &RECOVERY_KEYS, &plan.recovery_settings())?;
    write_private(&pgdata.join("recovery.signal"), b"")?;
    // Files fetched ahead by an earlier attempt are valid (archived files never change), but
    // the spool is only ever this attempt's.
    let spool = crate::restore_prefetch::spool_dir(pgdata);
    remove_dir(&spool)?;
    let fetcher = crate::restore_fetch::serve(ctx, &plan.agent, plan.agent_env(ctx))?;
    let recovered = recover(ctx).await;
    fetcher.abort();
    recovered?;
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

/// Runs the recovery on a server that listens only on its socket until it has promoted itself
/// at the target, then sets this cluster's passwords and stops it.
async fn recover(ctx: &Context) -> Result<(), Error> {
    let mut server = Postmaster::start(ctx, Listen::SocketOnly, None)?;
    tracing::info!("recovering from the archive");
    loop {
        if let Some(status) = server.exited() {
            return Err(Error::State(format!(
                "the recovery stopped ({status}) before promoting: PostgreSQL's log names the \
                 cause (a target past the end of the archive, a missing or damaged WAL file)"
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
    let adopted = crate::pgdata::adopt_roles(ctx).await;
    server.stop(libc::SIGINT, Duration::from_secs(120)).await;
    adopted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn no_backup_id_no_restore() {
        let plan = RestorePlan::from_vars(&vars(&[("RESTORE_TUSK_STORE", "s3")])).unwrap();
        assert!(plan.is_none());
    }

    #[test]
    fn the_source_store_reaches_the_agent_unprefixed_and_alone() {
        let plan = RestorePlan::from_vars(&vars(&[
            ("TUSK_RESTORE_BACKUP_ID", "base1"),
            ("TUSK_RESTORE_TARGET_TIME", "2026-11-28 10:00:00+00"),
            ("RESTORE_TUSK_STORE", "s3"),
            ("RESTORE_AWS_SECRET_ACCESS_KEY", "source-secret"),
            ("AWS_SECRET_ACCESS_KEY", "archive-secret"),
            ("TUSK_STORE", "gcs"),
            ("PATH", "/usr/bin"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(plan.backup_id, "base1");
        assert_eq!(
            plan.env,
            vars(&[
                ("TUSK_STORE", "s3"),
                ("AWS_SECRET_ACCESS_KEY", "source-secret"),
                ("PATH", "/usr/bin")
            ])
        );
        assert_eq!(plan.agent, PathBuf::from(DEFAULT_AGENT));
        let settings = plan.recovery_settings();
        assert!(settings.contains(&(
            "recovery_target_time",
            "2026-11-28 10:00:00.000000+00".into()
        )));
        assert!(settings.contains(&("recovery_target_action", "promote".into())));
        assert!(
            settings.iter().all(|(k, _)| RECOVERY_KEYS.contains(k)),
            "every key written is removed after the restore"
        );
    }

    #[test]
    fn without_a_target_recovery_runs_to_the_end_of_the_archive() {
        let plan = RestorePlan::from_vars(&vars(&[
            ("TUSK_RESTORE_BACKUP_ID", "latest"),
            ("RESTORE_TUSK_STORE", "s3"),
        ]))
        .unwrap()
        .unwrap();
        let keys: Vec<&str> = plan.recovery_settings().iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["restore_command", "recovery_target_timeline"]);
    }

    #[test]
    fn every_accepted_time_becomes_one_postgresql_takes() {
        for (given, expected) in [
            ("2026-11-28T10:00:00Z", "2026-11-28 10:00:00.000000+00"),
            ("2026-11-28T10:00:00+00:00", "2026-11-28 10:00:00.000000+00"),
            (
                "2026-11-28T11:30:00.25+01:30",
                "2026-11-28 10:00:00.250000+00",
            ),
            (
                "2026-11-28T10:00:00.123456789Z",
                "2026-11-28 10:00:00.123456+00",
            ),
            ("2026-11-28 10:00:00.5-05", "2026-11-28 15:00:00.500000+00"),
        ] {
            assert_eq!(postgres_time(given).unwrap(), expected, "{given}");
        }
        let refused = postgres_time("2026-11-28 10:00:00")
            .unwrap_err()
            .to_string();
        assert!(refused.contains("not a time with an offset"), "{refused}");
        assert!(postgres_time("2026-13-45T10:00:00Z").is_err());
    }

    #[test]
    fn a_replicas_base_backup_leaves_no_standby_behind() {
        let dir = tempfile::tempdir().unwrap();
        let pgdata = dir.path();
        std::fs::write(pgdata.join("standby.signal"), "").unwrap();
        std::fs::write(
            pgdata.join("postgresql.auto.conf"),
            "max_slot_wal_keep_size = '800MB'\nprimary_conninfo = 'host=src-0'\n\
             primary_slot_name = 'tusk_src_1'\n",
        )
        .unwrap();
        forget_the_source_standby(pgdata).unwrap();
        assert!(!pgdata.join("standby.signal").exists());
        let conf = std::fs::read_to_string(pgdata.join("postgresql.auto.conf")).unwrap();
        assert_eq!(conf, "max_slot_wal_keep_size = '800MB'\n");
    }

    #[test]
    fn two_targets_or_no_store_are_refused() {
        let two = RestorePlan::from_vars(&vars(&[
            ("TUSK_RESTORE_BACKUP_ID", "b"),
            ("RESTORE_TUSK_STORE", "s3"),
            ("TUSK_RESTORE_TARGET_LSN", "0/3000000"),
            ("TUSK_RESTORE_TARGET_NAME", "before"),
        ]));
        assert!(two.is_err());
        let storeless = RestorePlan::from_vars(&vars(&[("TUSK_RESTORE_BACKUP_ID", "b")]));
        assert!(storeless.is_err());
    }
}
