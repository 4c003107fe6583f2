//! When the primary's manager checks the continuity of its archive (issue 28,
//! docs/src/design/pitr.md §6; the check is `backup_store::continuity`): every
//! `TUSK_CONTINUITY_EVERY_SECONDS` (an hour by default), soon after each base backup (the
//! archiver saw its backup history file) and at once when this server becomes the primary. A
//! missing segment the server holds in its own `pg_wal` is uploaded from there (the archiver's
//! `check_continuity`): a promoted standby received the WAL a dying primary had not archived.
//! Only while this server is a primary: a standby does not archive, and its report would go
//! stale. The last report goes into `/status`
//! (`archive.continuity`), the metrics and the operator's `ContinuousArchiving` condition; a
//! Warning Event `ArchiveBroken` when a check finds what the previous one did not.
//!
//! The scheduled checks list only what arrived since the last one (`continuity::check_since`:
//! their cost does not grow with the archive's age); the one after a base backup and the one at
//! a promotion list the whole archive, and so does a scheduled one once a day.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tusk_contract::status::ArchiveContinuity;

use crate::archiver::Archiver;
use crate::context::Context;
use crate::events::Events;
use crate::monitor::Observation;

/// The schedule, when the environment does not set one.
const EVERY: Duration = Duration::from_secs(3600);
/// The first check after the manager starts: time for a backlog from before it to drain.
const FIRST_AFTER: Duration = Duration::from_secs(60);
/// After a base backup, how often and how many times the check looks for its manifest.
const AWAIT_EVERY: Duration = Duration::from_secs(10);
const AWAIT_TRIES: u32 = 30;
/// The restore point's counts read every table: bounded, but generously.
const POINT_TIMEOUT: Duration = Duration::from_secs(3600);

/// The schedule from `TUSK_CONTINUITY_EVERY_SECONDS` (tests shorten it).
pub fn every_from_env() -> Result<Duration, String> {
    match std::env::var("TUSK_CONTINUITY_EVERY_SECONDS") {
        Err(_) => Ok(EVERY),
        Ok(s) => match s.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Duration::from_secs(n)),
            _ => Err(format!(
                "TUSK_CONTINUITY_EVERY_SECONDS={s:?} is not a positive number"
            )),
        },
    }
}

/// Runs the checks for as long as the manager runs; after each base backup, the restore point
/// its verification recovers to comes first.
pub fn spawn(
    ctx: Arc<Context>,
    archiver: Arc<Archiver>,
    mut observed: watch::Receiver<Observation>,
    events: Events,
    every: Duration,
) {
    tokio::spawn(async move {
        let mut next = tokio::time::Instant::now() + FIRST_AFTER.min(every);
        // After a base backup: (base backups known before it, tries left).
        let mut awaited: Option<(u64, u32)> = None;
        let mut was_primary = false;
        loop {
            // (asked for after a base backup, a promotion): both list the whole archive.
            let (asked, promoted) = tokio::select! {
                _ = tokio::time::sleep_until(next) => (false, false),
                _ = archiver.continuity().asked() => (true, false),
                changed = observed.changed() => {
                    if changed.is_err() {
                        return; // the monitor is gone: the manager is stopping
                    }
                    // A promotion: the old primary may have died with WAL unarchived, which
                    // this server may still hold; look now, before checkpoints recycle it.
                    // (A server that did not answer says nothing about its role.)
                    let role = observed.borrow().facts.as_ref().map(|f| !f.in_recovery);
                    let promoted = role == Some(true) && !was_primary;
                    if let Some(primary) = role {
                        was_primary = primary;
                    }
                    if !promoted {
                        continue;
                    }
                    (false, true)
                }
            };
            if asked {
                let known = archiver.continuity().last().map_or(0, |r| r.base_backups);
                awaited = Some((known, AWAIT_TRIES));
            }
            next = tokio::time::Instant::now() + every;
            if !is_primary(&observed) {
                continue;
            }
            if asked {
                restore_point(&ctx).await;
            }
            check(&archiver, &events, asked || promoted).await;
            // The backup's manifest follows its history file by the time its last WAL takes to
            // archive: until the check counts it, look again shortly.
            let counted = archiver.continuity().last().map_or(0, |r| r.base_backups);
            awaited = match awaited {
                Some((known, tries)) if counted <= known && tries > 1 => {
                    next = tokio::time::Instant::now() + AWAIT_EVERY.min(every);
                    Some((known, tries - 1))
                }
                _ => None,
            };
        }
    });
}

fn is_primary(observed: &watch::Receiver<Observation>) -> bool {
    (observed.borrow().facts.as_ref()).is_some_and(|f| !f.in_recovery)
}

/// `backup-agent restore-point` on this primary (over the local socket, as `postgres`): a
/// named point with every table's exact row count, stored beside the archive, which the
/// verification of the base backup just taken recovers to. A failure is only logged: that
/// verification then replays to the end of the archive, without counts to compare.
async fn restore_point(ctx: &Context) {
    let agent = crate::restore::agent_binary();
    if !agent.exists() {
        tracing::debug!(agent = %agent.display(), "no backup agent: no restore point");
        return;
    }
    // The bucket and its credentials, never the database's passwords (local socket: peer).
    let passwords = [
        "POSTGRES_PASSWORD",
        "TUSK_APP_PASSWORD",
        "TUSK_REPLICATION_PASSWORD",
    ];
    let bucket = |k: &str| {
        (k.starts_with("TUSK_") || k.starts_with("AWS_") || k.starts_with("GOOGLE_"))
            && !passwords.contains(&k)
    };
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| bucket(k) || k == "PATH")
        .collect();
    env.extend([
        (
            "PGHOST".to_owned(),
            ctx.args.socket_dir.display().to_string(),
        ),
        ("PGPORT".to_owned(), ctx.args.pg_port.to_string()),
        ("PGUSER".to_owned(), "postgres".to_owned()),
        ("TUSK_NAMESPACE".to_owned(), ctx.args.namespace.clone()),
        ("TUSK_CLUSTER".to_owned(), ctx.args.cluster.clone()),
    ]);
    let mut cmd = std::process::Command::new(&agent);
    cmd.arg("restore-point");
    let run = ctx
        .reaper
        .run_with_env(cmd, "backup-agent restore-point", &env, POINT_TIMEOUT)
        .await;
    match run {
        Ok(_) => tracing::info!("restore point for the verification written"),
        Err(error) => tracing::warn!(%error, "writing the verification's restore point failed"),
    }
}

/// One check, recorded; a Warning Event when it finds something new.
pub async fn check(archiver: &Archiver, events: &Events, whole: bool) {
    let report = match archiver.check_continuity(whole).await {
        Ok(report) => report,
        Err(error) => {
            tracing::warn!(%error, "the archive continuity check could not run");
            // The previous result stays the best knowledge; the error is shown beside it.
            let mut report = archiver.continuity().last().unwrap_or_default();
            report.error = Some(error);
            report
        }
    };
    if report.error.is_none() {
        tracing::info!(
            segments = report.segments,
            missing = report.missing_count,
            released = report.released_count,
            "archive continuity checked"
        );
    }
    if report.healed_count > 0 {
        let note = format!(
            "uploaded {} segment(s) missing from the archive from this server's pg_wal: {}",
            report.healed_count,
            report.healed.join(", ")
        );
        tracing::info!(%note, "archive hole filled");
        events.normal("ArchiveHealed", "Archive", note);
    }
    let summary = describe(&report);
    if archiver.continuity().record(report) {
        events.warning("ArchiveBroken", "Archive", summary);
    }
}

/// One sentence about a report with breaks, for the Event and the log.
pub fn describe(report: &ArchiveContinuity) -> String {
    let mut parts = Vec::new();
    if report.missing_count > 0 {
        let more = report.missing_count - report.missing.len() as u64;
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        parts.push(format!("missing {}{tail}", report.missing.join(", ")));
    }
    if !report.missing_history.is_empty() {
        let timelines: Vec<String> = report.missing_history.iter().map(u32::to_string).collect();
        parts.push(format!(
            "no history file for timeline(s) {}",
            timelines.join(", ")
        ));
    }
    if !report.foreign.is_empty() {
        parts.push(format!("not this system's: {}", report.foreign.join("; ")));
    }
    if report.released_count > 0 {
        parts.push(format!(
            "{} segment(s) released by the disk policy",
            report.released_count
        ));
    }
    if let Some(error) = &report.error {
        parts.push(format!("the check could not run: {error}"));
    }
    format!("the WAL archive is broken: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::continuity_checks::tests::broken;

    #[test]
    fn a_description_names_every_kind_of_break() {
        let mut report = broken(&["000000010000000000000005"]);
        report.missing_count = 3;
        report.missing_history = vec![2];
        report.foreign = vec!["000000010000000000000007: it belongs to database system 8".into()];
        report.released_count = 2;
        let said = describe(&report);
        for part in [
            "missing 000000010000000000000005 and 2 more",
            "timeline(s) 2",
            "database system 8",
            "2 segment(s) released",
        ] {
            assert!(said.contains(part), "{said}");
        }
    }
}
