//! The base backups an upgrade owes while WAL archiving is on.
//!
//! - In place, **before** the database stops: one of the old system, the rollback point —
//!   `pg_upgrade --link` leaves no old directory once the new server has started, so a restore
//!   to a time before the upgrade is the way back, and it starts from such a base backup.
//! - Online, **before** the old set is deleted: one of the new system. Its WAL archives under
//!   its own identifier, and until a base backup of it exists no point-in-time restore reaches
//!   anything written since the switch; the stopped old set is the only copy predating a loss.
//!
//! Any completed base backup of the system in question settles it (a scheduled one too).

use std::collections::BTreeMap;

use kube::api::Api;

use super::plan::OwedBaseBackup;
use crate::crd::{Backup, BackupMethod, BackupPhase, UpgradeStatus};
use crate::error::Result;
use crate::resources::{CLUSTER_LABEL, Cluster, MANAGED_BY};
use crate::runtime::Context;
use crate::runtime::apply::create;

/// The Backup of the new system an upgrade asks for: `<name>-v<to>-base`, named after the
/// upgrade so it is asked for once (deleting a failed one asks again).
pub fn after(cluster: &str, record: &UpgradeStatus) -> String {
    format!("{cluster}-v{}-base", record.to)
}

/// The Backup of the old system an in-place upgrade asks for before it stops the database:
/// `<name>-before-v<to>`.
pub fn before(cluster: &str, record: &UpgradeStatus) -> String {
    format!("{cluster}-before-v{}", record.to)
}

/// Where a base backup of `system` stands among the cluster's `backups`: owed only with
/// archiving on; any completed physical backup of `system` settles it (a scheduled one too).
pub fn judge<'a>(
    archiving: bool,
    system: Option<&str>,
    asked: &str,
    backups: impl IntoIterator<Item = &'a Backup>,
) -> OwedBaseBackup {
    if !archiving {
        return OwedBaseBackup::NotOwed;
    }
    let mut ours = None;
    for backup in backups {
        let physical = backup.status.as_ref().and_then(|s| s.physical.as_ref());
        let of_system = physical.is_some_and(|p| Some(p.system_identifier.as_str()) == system);
        if of_system && backup.phase() == BackupPhase::Completed {
            return OwedBaseBackup::NotOwed;
        }
        if backup.metadata.name.as_deref() == Some(asked) {
            ours = Some(backup.phase());
        }
    }
    match ours {
        None => OwedBaseBackup::Missing,
        Some(BackupPhase::Failed) => OwedBaseBackup::Failed(asked.to_owned()),
        // Completed but of another system cannot be ours (it reads the serving set); taken as
        // still owed rather than guessed.
        Some(_) => OwedBaseBackup::Taking(asked.to_owned()),
    }
}

/// The physical Backup `name` of `cluster`, labelled as the operator's.
pub fn backup(cluster: &Cluster, name: &str) -> Backup {
    let mut backup = Backup::of_cluster(name, cluster.namespace, cluster.name);
    backup.spec.method = BackupMethod::Physical;
    backup.metadata.labels = Some(BTreeMap::from([
        (CLUSTER_LABEL.to_owned(), cluster.name.to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGED_BY.to_owned(),
        ),
    ]));
    backup
}

/// Creates [`backup`] (an existing one of that name is left alone).
pub async fn ask(cluster: &Cluster<'_>, name: &str, ctx: &Context) -> Result<()> {
    let api: Api<Backup> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    create(&api, &backup(cluster, name)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BackupStatus, PhysicalRange};

    fn backup(name: &str, phase: BackupPhase, system: &str) -> Backup {
        let mut backup = Backup::of_cluster(name, "ns", "demo");
        backup.spec.method = BackupMethod::Physical;
        backup.status = Some(BackupStatus {
            phase: Some(phase),
            physical: Some(PhysicalRange {
                system_identifier: system.to_owned(),
                timeline: 1,
                start_lsn: "0/2000028".into(),
                stop_lsn: "0/2000100".into(),
            }),
            ..BackupStatus::default()
        });
        backup
    }

    #[test]
    fn owed_with_archiving_until_a_completed_base_backup_of_the_new_system_exists() {
        let asked = "demo-v17-base";
        let old = backup("nightly", BackupPhase::Completed, "111");
        let judged = |backups: &[&Backup]| judge(true, Some("222"), asked, backups.to_vec());
        assert_eq!(
            judge(false, Some("222"), asked, [&old]),
            OwedBaseBackup::NotOwed
        );
        assert_eq!(judged(&[&old]), OwedBaseBackup::Missing);
        let running = backup(asked, BackupPhase::Running, "222");
        assert_eq!(
            judged(&[&old, &running]),
            OwedBaseBackup::Taking(asked.into())
        );
        let failed = backup(asked, BackupPhase::Failed, "222");
        assert_eq!(
            judged(&[&old, &failed]),
            OwedBaseBackup::Failed(asked.into())
        );
        let done = backup(asked, BackupPhase::Completed, "222");
        assert_eq!(judged(&[&old, &done]), OwedBaseBackup::NotOwed);
        // A scheduled base backup of the new system settles it as well.
        let scheduled = backup("demo-base-1", BackupPhase::Completed, "222");
        assert_eq!(judged(&[&failed, &scheduled]), OwedBaseBackup::NotOwed);
    }
}
