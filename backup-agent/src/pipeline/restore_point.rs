//! `restore-point`: a named restore point on the primary with every table's exact row count at
//! that point (issue 28), stored beside the archive for the verification of physical backups
//! (`backup_store::points`).
//!
//! Exactness: each database is counted in a repeatable-read transaction whose snapshot is
//! taken before the point is written; a snapshot taken after the point must show that no
//! transaction finished in between (every transaction running at the first snapshot, or begun
//! since, still runs). Then what each count saw is what a recovery to the point replays. When
//! a commit slips in between, the point is abandoned (its name is never used again) and the
//! dance repeated, a few times at most.

use std::collections::{BTreeMap, BTreeSet};

use tokio_postgres::Client;

use crate::error::AgentError;
use crate::pg::{PgParams, counts};
use backup_store::points::{RestorePoint, point_name};

/// Tries before giving up on a primary that never pauses between two commits.
pub const ATTEMPTS: u32 = 20;

/// A transaction snapshot, as `pg_current_snapshot()` prints it: `xmin:xmax:xip,…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub xmin: u64,
    pub xmax: u64,
    pub running: BTreeSet<u64>,
}

impl Snapshot {
    pub fn parse(text: &str) -> Option<Snapshot> {
        let mut parts = text.trim().splitn(3, ':');
        let xmin = parts.next()?.parse().ok()?;
        let xmax = parts.next()?.parse().ok()?;
        let running = match parts.next()? {
            "" => BTreeSet::new(),
            list => list
                .split(',')
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?,
        };
        Some(Snapshot {
            xmin,
            xmax,
            running,
        })
    }

    /// Whether no transaction finished between this snapshot and `later`: each one running
    /// here, or begun since (`xmax` to `later.xmax`), is still running there.
    pub fn nothing_finished_before(&self, later: &Snapshot) -> bool {
        self.running.iter().all(|x| later.running.contains(x))
            && (self.xmax..later.xmax).all(|x| later.running.contains(&x))
    }
}

/// Writes the point and counts every database at it; `None` when no attempt was exact.
pub async fn write(
    pg: &PgParams,
    now: jiff::Timestamp,
) -> Result<Option<RestorePoint>, AgentError> {
    let admin = pg.connect(&pg.maintenance_db).await?;
    let names: Vec<String> = PgParams::databases(&admin)
        .await?
        .into_iter()
        .map(|d| d.name)
        .collect();
    for attempt in 0..ATTEMPTS {
        let mut counted = Vec::new();
        let mut before = Vec::new();
        for name in &names {
            let client = pg.connect(name).await?;
            let sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; ";
            client
                .batch_execute(sql)
                .await
                .map_err(db("starting a snapshot"))?;
            before.push(snapshot(&client).await?);
            counted.push((name.clone(), client));
        }
        // The point's name changes with each attempt: a recovery stops at the first of a name.
        let name = point_name(now + jiff::SignedDuration::from_secs(i64::from(attempt)));
        let row = admin
            .query_one(
                "SELECT pg_create_restore_point($1)::text, \
                 substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8)",
                &[&name],
            )
            .await
            .map_err(db("creating the restore point"))?;
        let (lsn, timeline): (String, String) = (row.get(0), row.get(1));
        let after = snapshot(&admin).await?;
        if !before.iter().all(|s| s.nothing_finished_before(&after)) {
            tracing::info!(
                attempt,
                "a transaction finished while the point was written; again"
            );
            continue;
        }
        let mut databases = BTreeMap::new();
        for (database, client) in counted {
            databases.insert(
                database.clone(),
                counts::count_tables(&client, &database).await?,
            );
            client
                .batch_execute("COMMIT")
                .await
                .map_err(db("ending a snapshot"))?;
        }
        // The point's segment goes to the archive now, not whenever it fills.
        admin
            .batch_execute("SELECT pg_switch_wal()")
            .await
            .map_err(db("switching the WAL segment"))?;
        return Ok(Some(RestorePoint {
            name,
            lsn,
            timeline: u32::from_str_radix(&timeline, 16).unwrap_or(0),
            created_at: now,
            databases,
        }));
    }
    Ok(None)
}

async fn snapshot(client: &Client) -> Result<Snapshot, AgentError> {
    let row = client
        .query_one("SELECT pg_current_snapshot()::text", &[])
        .await
        .map_err(db("reading the snapshot"))?;
    let text: String = row.get(0);
    Snapshot::parse(&text)
        .ok_or_else(|| AgentError::Database(format!("unreadable snapshot {text:?}")))
}

fn db(what: &'static str) -> impl Fn(tokio_postgres::Error) -> AgentError {
    move |e| AgentError::Database(format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(text: &str) -> Snapshot {
        Snapshot::parse(text).unwrap()
    }

    #[test]
    fn snapshots_parse_as_postgresql_prints_them() {
        assert_eq!(
            snap("740:746:740,742"),
            Snapshot {
                xmin: 740,
                xmax: 746,
                running: BTreeSet::from([740, 742])
            }
        );
        assert!(snap("746:746:").running.is_empty());
        assert!(Snapshot::parse("746:x:").is_none());
    }

    #[test]
    fn a_point_is_exact_only_if_nothing_finished_in_between() {
        let before = snap("740:746:740,742");
        // The same, or transactions begun since and still running: exact.
        assert!(before.nothing_finished_before(&snap("740:746:740,742")));
        assert!(before.nothing_finished_before(&snap("740:748:740,742,746,747")));
        // 742 finished (committed or not, it cannot be told): not exact.
        assert!(!before.nothing_finished_before(&snap("740:746:740")));
        // 746 began and finished in between: not exact.
        assert!(!before.nothing_finished_before(&snap("740:748:740,742,747")));
    }
}
