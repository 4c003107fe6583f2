//! The continuity check as the primary's manager runs it, and the holes it fills from its own
//! `pg_wal` (docs/src/design/pitr.md §6). Since standbys keep what their primary had not archived
//! (`standby_archive.rs`), a promoted one archives that tail as its `.ready` files; the fill
//! stays for holes of files a server holds but PostgreSQL no longer has ready (a deletion by
//! hand, a standby from before that change).

use super::*;

/// Segments one continuity check uploads from this server's pg_wal at most.
const HEAL_AT_MOST: usize = 1000;

impl Archiver {
    /// Checks the continuity of this system's archive (`crate::continuity`). Files PostgreSQL
    /// still has ready, or that are uploading, are read before the bucket is listed: one
    /// archived while the listing runs is then not taken for a gap.
    /// `whole`: list the whole archive, not only what arrived since the last check (after a
    /// base backup and a promotion: a file deleted from the bucket by hand, or never archived
    /// by a primary that died, is then named at once; otherwise within a day).
    pub async fn check_continuity(&self, whole: bool) -> Result<ArchiveContinuity, String> {
        let mut pending: BTreeSet<String> = self.ready().into_iter().collect();
        pending.extend(lock(&self.uploads).keys().cloned());
        let opened = self.open().await?;
        let system = wal::system_identifier(&self.pgdata).map_err(|e| e.to_string())?;
        let store = opened.store.as_ref();
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
        let now = now.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut healed = Vec::new();
        // What the last check listed: this one lists each timeline's folder past it only.
        let mut known = self.continuity.take_known().filter(|_| !whole);
        loop {
            let checked =
                continuity::check_since(store, &opened.location, system, &pending, now, &mut known)
                    .await;
            let mut report = match checked {
                Ok((report, _requests)) => report,
                Err(e) => return Err(e.to_string()), // the next check lists in full
            };
            // A hole this server can fill: segments of an earlier timeline it holds in its own
            // pg_wal (a promoted standby received them from a primary that died before
            // archiving them). Its own timeline's went through this archiver already.
            let archive = WalArchive::new(&opened.location, system);
            let before = healed.len();
            let current = report.timelines.last().map(|t| format!("{t:08X}"));
            let earlier = |name: &&String| current.as_deref().is_some_and(|c| !name.starts_with(c));
            for name in report.missing.iter().filter(earlier) {
                let path = self.pgdata.join("pg_wal").join(name);
                let Ok(file) = WalName::parse(name) else {
                    continue;
                };
                if !path.is_file() {
                    continue;
                }
                match wal::push_file(store, &archive, &file, &path).await {
                    Ok(_) => healed.push(name.clone()),
                    Err(e) => tracing::warn!(file = %name, error = %e, "filling a hole failed"),
                }
            }
            if healed.len() == before || healed.len() >= HEAL_AT_MOST {
                self.continuity.keep_known(known);
                report.healed_count = healed.len() as u64;
                healed.truncate(continuity::NAMED);
                report.healed = healed;
                return Ok(report);
            }
        }
    }
}
