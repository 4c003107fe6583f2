//! The base backup a point-in-time restore starts from, as the restore sees it ([`Base`], from
//! its manifest), and which one it is for a target ([`choose`]: as the instance manager
//! resolves `latest`), or why none can be ([`Refusal`]). The archive's side of the judgement
//! (does the WAL reach the target) is `restore_window`'s.

use backup_store::lsn::Lsn;
use backup_store::manifest::Manifest;
use k8s_openapi::jiff::Timestamp;

use crate::crd::RestoreTarget;

/// Why a target is refused. `retry`: the archive may still reach it (a source that archives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
    pub retry: bool,
}

/// A base backup, as the restore sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    pub id: String,
    pub completed_at: Timestamp,
    pub system: String,
    pub stop: Option<Lsn>,
    pub segment_size: Option<u64>,
    /// Where its WAL begins: timeline and start LSN.
    pub start: Option<(u32, Lsn)>,
    /// Why a recovery along its system's newest timeline cannot start from it (it was taken
    /// on a branch that history left), if it cannot.
    pub off_history: Option<String>,
    /// The server's major, from the manifest's `server_version` ("15.14 (Debian …)").
    pub major: Option<u32>,
}

impl Base {
    /// The base backup `manifest` describes; None for a dump.
    pub fn of(manifest: &Manifest) -> Option<Self> {
        let physical = manifest.physical.as_ref()?;
        Some(Self {
            id: manifest.backup_id.clone(),
            completed_at: manifest.completed_at,
            system: physical.system_identifier.clone(),
            stop: Lsn::parse(&physical.stop_lsn).ok(),
            segment_size: physical.wal_segment_size,
            start: Lsn::parse(&physical.start_lsn)
                .ok()
                .map(|lsn| (physical.timeline, lsn)),
            off_history: None,
            major: (manifest.server_version.split(['.', ' ']).next())
                .and_then(|major| major.parse().ok()),
        })
    }
}

/// A physical restore runs the base backup's own major: a data directory of another major
/// does not start (an upgraded cluster's archive holds both: the time decides which).
pub fn same_major(base: &Base, declared: u32, source: &str) -> Result<(), Refusal> {
    match base.major {
        Some(major) if major != declared => Err(refused(
            "BaseBackupOfAnotherMajor",
            format!(
                "base backup {} of {source} is of PostgreSQL {major}, this cluster declares \
                 {declared}: restore it with spec.version \"{major}\" (and raise the version \
                 afterwards to upgrade)",
                base.id
            ),
        )),
        _ => Ok(()),
    }
}

pub(super) fn refused(reason: &'static str, message: String) -> Refusal {
    Refusal {
        reason,
        message,
        retry: false,
    }
}

/// The base backup the first pod will restore for `target` (`backup_id` `latest`, oldest first
/// in `bases`, resolves as the manager does: for a time, the newest completed by then; for an
/// LSN, the newest consistent by then; else the newest), or why there is none that reaches the
/// target.
pub fn choose<'a>(
    target: &RestoreTarget,
    backup_id: &str,
    bases: &'a [Base],
    source: &str,
) -> Result<&'a Base, Refusal> {
    let named: Vec<&Base> = if backup_id == "latest" {
        // The recovery follows the newest timeline: a base backup off its history cannot start it.
        bases.iter().filter(|b| b.off_history.is_none()).collect()
    } else {
        let named: Vec<&Base> = bases.iter().filter(|b| b.id == backup_id).collect();
        if let Some(why) = named.iter().find_map(|b| b.off_history.as_deref()) {
            return Err(refused(
                "BaseBackupOffHistory",
                format!(
                    "base backup {backup_id} of {source} cannot start this restore: {why}; a \
                     restore follows the newest timeline (use backupId: latest, or a base backup \
                     taken on that timeline's history)"
                ),
            ));
        }
        named
    };
    let what = match backup_id {
        "latest" => format!("no base backup of {source} on its newest timeline's history"),
        id => format!("no base backup {id} of {source}"),
    };
    let newest = named.last().copied().ok_or_else(|| {
        refused(
            "NoBaseBackup",
            format!("{what} is complete: a point-in-time restore starts from one"),
        )
    })?;
    if let Some(time) = target
        .time
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok())
    {
        let first = named[0].completed_at;
        return named.iter().rev().find(|b| b.completed_at <= time).copied().ok_or_else(|| {
            refused(
                "TargetBeforeRecoveryWindow",
                format!("{time} is before the recovery window: {what} completed by then (the first completed at {first})"),
            )
        });
    }
    if let Some(lsn) = target.lsn.as_deref().and_then(|l| Lsn::parse(l).ok()) {
        // As the manager resolves it: the newest base backup consistent by then.
        let consistent = named
            .iter()
            .rev()
            .find(|b| b.stop.is_some_and(|s| s <= lsn));
        return consistent.copied().ok_or_else(|| {
            let first = named[0].stop.map(|s| s.to_string()).unwrap_or_default();
            refused(
                "TargetBeforeRecoveryWindow",
                format!("LSN {lsn} is before the recovery window: {what} is consistent by then (the first at {first})"),
            )
        });
    }
    Ok(newest)
}
