//! The new major's first base backup, which an online upgrade's old set outlives while WAL
//! archiving is on: the new system's WAL archives under its own identifier, and until a base
//! backup of it exists no point-in-time restore can reach anything written since the switch —
//! the stopped old set is then the only copy that predates a loss of the new one.

use std::collections::BTreeMap;

use kube::api::Api;

use super::plan::NewBaseBackup;
use crate::crd::{Backup, BackupMethod, BackupPhase, UpgradeStatus};
use crate::error::Result;
use crate::resources::{CLUSTER_LABEL, Cluster, MANAGED_BY};
use crate::runtime::Context;
use crate::runtime::apply::create;

/// The Backup an upgrade asks for: `<name>-v<to>-base`, named after the upgrade so it is
/// asked for once (deleting a failed one asks again).
pub fn name(cluster: &str, record: &UpgradeStatus) -> String {
    format!("{cluster}-v{}-base", record.to)
}

/// Where the new system's base backup stands among the cluster's `backups`: owed only with
/// archiving on; any completed physical backup of `system` settles it (a scheduled one too).
pub fn judge<'a>(
    archiving: bool,
    system: Option<&str>,
    asked: &str,
    backups: impl IntoIterator<Item = &'a Backup>,
) -> NewBaseBackup {
    if !archiving {
        return NewBaseBackup::NotOwed;
    }
    let mut ours = None;
    for backup in backups {
        let physical = backup.status.as_ref().and_then(|s| s.physical.as_ref());
        let of_system = physical.is_some_and(|p| Some(p.system_identifier.as_str()) == system);
        if of_system && backup.phase() == BackupPhase::Completed {
            return NewBaseBackup::NotOwed;
        }
        if backup.metadata.name.as_deref() == Some(asked) {
            ours = Some(backup.phase());
        }
    }
    match ours {
        None => NewBaseBackup::Missing,
        Some(BackupPhase::Failed) => NewBaseBackup::Failed(asked.to_owned()),
        // Completed but of another system cannot be ours (it reads the serving set); taken as
        // still owed rather than guessed.
        Some(_) => NewBaseBackup::Taking(asked.to_owned()),
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
            NewBaseBackup::NotOwed
        );
        assert_eq!(judged(&[&old]), NewBaseBackup::Missing);
        let running = backup(asked, BackupPhase::Running, "222");
        assert_eq!(
            judged(&[&old, &running]),
            NewBaseBackup::Taking(asked.into())
        );
        let failed = backup(asked, BackupPhase::Failed, "222");
        assert_eq!(
            judged(&[&old, &failed]),
            NewBaseBackup::Failed(asked.into())
        );
        let done = backup(asked, BackupPhase::Completed, "222");
        assert_eq!(judged(&[&old, &done]), NewBaseBackup::NotOwed);
        // A scheduled base backup of the new system settles it as well.
        let scheduled = backup("demo-base-1", BackupPhase::Completed, "222");
        assert_eq!(judged(&[&failed, &scheduled]), NewBaseBackup::NotOwed);
    }
}
