//! Whose backups a cluster may delete: retention and the `onDelete: Delete` finalizer share one
//! rule, so neither removes what another cluster wrote.
//!
//! A prefix `<path>/<namespace>/<cluster>/` is not an identity: a re-created cluster (same
//! name, new uid) and the same cluster in a second Kubernetes cluster (a DR pair) share it. The
//! owner of a backup is the `metadata.uid` its writer recorded in the manifest (or, before the
//! manifest exists, in its claim). The rule:
//! - recorded by this cluster's uid: ours;
//! - recorded by another uid: never deleted (a predecessor's or a peer's);
//! - nothing recorded (written before identities existed): treated as ours, as every backup was
//!   before. Skipping them would leave every upgraded cluster's older backups in the bucket
//!   forever, unnoticed; the backup a cluster was restored from is protected either way, and
//!   everything written from now on records its owner;
//! - the backup this cluster was restored from is never deleted, whoever wrote it.

use std::collections::BTreeSet;

/// The cluster on whose behalf backups are deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    /// `None` (e.g. the agent's `prune` run by hand without `--cluster-uid`): only backups that
    /// record no owner may be deleted.
    cluster_uid: Option<String>,
    /// Backup ids under this prefix that are never deleted.
    protected: BTreeSet<String>,
}

impl Owner {
    /// An empty uid counts as none (an unset environment variable).
    pub fn new(cluster_uid: Option<&str>) -> Self {
        Owner {
            cluster_uid: cluster_uid.filter(|u| !u.is_empty()).map(str::to_owned),
            protected: BTreeSet::new(),
        }
    }

    /// Never deletes `backup_id` (the backup this cluster was restored from).
    pub fn protecting(mut self, backup_id: impl Into<String>) -> Self {
        self.protected.insert(backup_id.into());
        self
    }

    pub fn cluster_uid(&self) -> Option<&str> {
        self.cluster_uid.as_deref()
    }

    /// Whether backup `backup_id`, whose writer recorded `recorded` as its owner, may go.
    pub fn may_delete(&self, backup_id: &str, recorded: Option<&str>) -> bool {
        if self.protected.contains(backup_id) {
            return false;
        }
        match recorded {
            None => true,
            Some(uid) => self.cluster_uid.as_deref() == Some(uid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_own_and_unmarked_backups_may_go() {
        let owner = Owner::new(Some("uid-b"));
        assert!(owner.may_delete("b1", Some("uid-b")));
        assert!(owner.may_delete("b1", None), "written before identities");
        assert!(
            !owner.may_delete("b1", Some("uid-a")),
            "a predecessor's or a peer's"
        );
    }

    #[test]
    fn the_restored_backup_never_goes() {
        let owner = Owner::new(Some("uid-b")).protecting("old");
        assert!(!owner.may_delete("old", None));
        assert!(!owner.may_delete("old", Some("uid-b")));
        assert!(owner.may_delete("new", Some("uid-b")));
    }

    #[test]
    fn without_an_identity_only_unmarked_backups_go() {
        for owner in [Owner::new(None), Owner::new(Some(""))] {
            assert!(owner.may_delete("b1", None));
            assert!(!owner.may_delete("b1", Some("uid-a")));
        }
    }
}
