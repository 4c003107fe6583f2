//! Which base backups a restore can start from (issue 46, defect 5). A recovery follows the
//! source's newest timeline (the highest numbered: every promotion takes one above all the
//! archive holds), so it can only start from a base backup consistent on that timeline's
//! history: on the newest timeline, or on an ancestor before the point where it switched away.
//! One taken on a branch that history left (a timeline that went on after a failover's old
//! primary, or an incarnation restored to an earlier point) ends in PostgreSQL's FATAL
//! "requested timeline is not a child of this server's history" after the whole download; and
//! retention must not keep one as the start of the recovery window while it deletes the only
//! base backup that reaches the live timeline.

use std::collections::BTreeMap;

use crate::continuity::{self, Stretch};
use crate::layout::ClusterLocation;
use crate::lsn::Lsn;
use crate::manifest::PhysicalBackup;
use crate::store::{ObjectStore, Pager};
use crate::wal::{self, WalArchive, WalError, WalName};

/// Each system's newest timeline history, as the recovery follows it.
#[derive(Debug, Clone, Default)]
pub struct LiveHistories {
    by_system: BTreeMap<String, Vec<Stretch>>,
}

impl LiveHistories {
    /// Reads the newest history of each system in `systems` (a listing of its `history/`
    /// folder, which holds one small file per timeline, and one read).
    pub async fn load(
        store: &dyn ObjectStore,
        location: &ClusterLocation,
        systems: Vec<String>,
    ) -> Result<Self, WalError> {
        let mut by_system = BTreeMap::new();
        for system in systems {
            let system = system.as_str();
            let Ok(id) = system.parse::<u64>() else {
                continue;
            };
            if by_system.contains_key(system) {
                continue;
            }
            let archive = WalArchive::new(location, id);
            let folder = format!("{}history/", archive.prefix());
            let mut newest = 1;
            let mut pages = Pager::new(store, &folder, &[]);
            while let Some(page) = pages.next().await? {
                let timelines = page.iter().filter_map(|o| {
                    let name = o.key.rsplit('/').next()?.strip_suffix(".history.zst")?;
                    u32::from_str_radix(name, 16).ok()
                });
                newest = timelines.fold(newest, u32::max);
            }
            let stretches = if newest == 1 {
                continuity::stretches(1, "").unwrap_or_default()
            } else {
                let file = WalName::parse(&format!("{newest:08X}.history"))?;
                let text = wal::fetch(store, &archive, &file)
                    .await?
                    .unwrap_or_default();
                continuity::stretches(newest, &String::from_utf8_lossy(&text)).map_err(
                    |reason| WalError::Damaged {
                        name: file.as_str().to_owned(),
                        reason,
                    },
                )?
            };
            by_system.insert(system.to_owned(), stretches);
        }
        Ok(Self { by_system })
    }

    /// The newest history of each system a base backup under `location` belongs to.
    pub async fn of_location(
        store: &dyn ObjectStore,
        location: &ClusterLocation,
    ) -> Result<Self, WalError> {
        let catalog = crate::catalog::load(store, location).await?;
        let systems = (catalog.backups.iter())
            .filter_map(|b| Some(b.manifest.physical.as_ref()?.system_identifier.clone()))
            .collect();
        Self::load(store, location, systems).await
    }

    /// Histories given as they are (tests, and callers that read them otherwise).
    pub fn of(by_system: impl IntoIterator<Item = (String, Vec<Stretch>)>) -> Self {
        Self {
            by_system: by_system.into_iter().collect(),
        }
    }

    /// Whether a restore following its system's newest history can start from `backup`. In
    /// doubt (a system not read, a position that does not parse) it can: PostgreSQL judges.
    pub fn holds(&self, backup: &PhysicalBackup) -> bool {
        let (Some(history), Ok(stop)) = (
            self.by_system.get(&backup.system_identifier),
            Lsn::parse(&backup.stop_lsn),
        ) else {
            return true;
        };
        on_history(history, backup.timeline, stop)
    }

    /// Why `backup` is not on its system's newest history, for a refusal.
    pub fn why_not(&self, backup: &PhysicalBackup) -> Option<String> {
        if self.holds(backup) {
            return None;
        }
        let history = self.by_system.get(&backup.system_identifier)?;
        let newest = history.last()?.timeline;
        let left = history.iter().find(|s| s.timeline == backup.timeline);
        Some(match left.and_then(|s| s.ends) {
            Some(end) => format!(
                "it is consistent at {} on timeline {}, which the newest timeline ({newest}) \
                 left at {end}",
                backup.stop_lsn, backup.timeline
            ),
            None => format!(
                "it was taken on timeline {}, a branch the newest timeline ({newest}) does not \
                 come from",
                backup.timeline
            ),
        })
    }
}

/// Whether a base backup on `timeline`, consistent at `stop`, lies on `history` (stretches of
/// the newest timeline, oldest first): its timeline is one of them, and it was consistent by
/// the point where that timeline was left.
pub fn on_history(history: &[Stretch], timeline: u32, stop: Lsn) -> bool {
    history
        .iter()
        .any(|s| s.timeline == timeline && s.ends.is_none_or(|end| stop <= end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backup(timeline: u32, stop: &str) -> PhysicalBackup {
        PhysicalBackup {
            system_identifier: "7".into(),
            timeline,
            start_lsn: "0/1000028".into(),
            stop_lsn: stop.into(),
            wal_segment_size: Some(16 << 20),
        }
    }

    fn histories() -> LiveHistories {
        // Timeline 1 was left at 0/5000060 for 2; 2 at 0/9000000 for 4 (3 is a branch).
        let history = continuity::stretches(4, "1\t0/5000060\tx\n2\t0/9000000\ty\n").unwrap();
        LiveHistories::of([("7".to_owned(), history)])
    }

    #[test]
    fn a_backup_is_on_the_newest_history_up_to_where_its_timeline_was_left() {
        let live = histories();
        assert!(live.holds(&backup(1, "0/3000100")));
        assert!(live.holds(&backup(1, "0/5000060")));
        assert!(live.holds(&backup(2, "0/8000000")));
        assert!(live.holds(&backup(4, "0/A000000")));
        // Timeline 1 after the switch: the old primary went on there.
        assert!(!live.holds(&backup(1, "0/6000100")));
        // A branch the newest history does not come from.
        assert!(!live.holds(&backup(3, "0/9500000")));
        let why = live.why_not(&backup(1, "0/6000100")).unwrap();
        assert!(why.contains("left at 0/5000060"), "{why}");
        let why = live.why_not(&backup(3, "0/9500000")).unwrap();
        assert!(why.contains("timeline 3, a branch"), "{why}");
    }

    #[test]
    fn in_doubt_a_backup_is_on_it() {
        let live = histories();
        let mut other = backup(3, "0/9500000");
        other.system_identifier = "8".into();
        assert!(live.holds(&other));
        assert!(live.holds(&backup(3, "not an lsn")));
    }

    /// What the agent's `base-restore` resolves: `latest` passes over a base backup off the
    /// newest history, and a named one is refused with the reason.
    #[tokio::test]
    async fn a_restore_resolves_only_base_backups_on_the_newest_history() {
        use crate::catalog::{self, CatalogError};
        use crate::manifest::{Manifest, Method};
        use crate::store::memory::MemoryStore;

        let store = MemoryStore::default();
        let loc = ClusterLocation::new("p", "ns", "db").unwrap();
        let history = WalName::parse("00000002.history").unwrap();
        let archive = WalArchive::new(&loc, 7);
        wal::push(&store, &archive, &history, b"1\t0/5000060\tx\n")
            .await
            .unwrap();
        for (id, stop, hours) in [("live", "0/3000100", 2), ("branch", "0/6000100", 1)] {
            let at = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(hours);
            let manifest = Manifest {
                format_version: crate::manifest::FORMAT_VERSION,
                backup_id: id.into(),
                namespace: "ns".into(),
                cluster: "db".into(),
                cluster_uid: None,
                started_at: at,
                completed_at: at,
                server_version: "15".into(),
                pg_dump_version: "pg_basebackup (PostgreSQL) 15".into(),
                compression: crate::compression::Compression::Zstd,
                files: Vec::new(),
                physical: Some(backup(1, stop)),
            };
            let json = bytes::Bytes::from(manifest.to_json().unwrap());
            store.put(&loc.manifest_key(id), json).await.unwrap();
        }
        let live = LiveHistories::of_location(&store, &loc).await.unwrap();
        let unusable = |m: &Manifest| m.physical.as_ref().and_then(|p| live.why_not(p));
        let resolve = |id: &'static str| {
            catalog::resolve_usable(&store, &loc, id, Some(Method::Physical), None, &unusable)
        };
        assert_eq!(resolve("latest").await.unwrap().backup_id, "live");
        let refused = resolve("branch").await.unwrap_err();
        assert!(
            matches!(refused, CatalogError::Unusable { .. }),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("left at 0/5000060"),
            "{refused}"
        );
    }
}
