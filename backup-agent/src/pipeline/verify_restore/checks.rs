//! The checks that run against the restored scratch server: every database present,
//! `pg_amcheck` clean, tables and row counts as recorded.

use tokio::io::AsyncReadExt;

use super::report::{Outcome, compare_counts};
use crate::error::AgentError;
use crate::pg::{PgParams, counts, spawn_tool};
use backup_store::manifest::{Manifest, TableCount};

/// Bytes of pg_amcheck's corruption report kept for the message.
const AMCHECK_OUTPUT: usize = 4 * 1024;

/// The databases the manifest lists.
pub fn manifest_databases(manifest: &Manifest) -> Vec<&str> {
    manifest
        .files
        .iter()
        .filter_map(|f| f.database.as_deref())
        .collect()
}

/// Every database of the manifest is among those `present` in the scratch server.
pub fn databases(manifest: &Manifest, present: &[String]) -> (Outcome, String) {
    let wanted = manifest_databases(manifest);
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| !present.iter().any(|p| p == w))
        .collect();
    match missing.is_empty() {
        true => (
            Outcome::Passed,
            format!(
                "all {} databases of the manifest restored: {wanted:?}",
                wanted.len()
            ),
        ),
        false => (
            Outcome::Failed,
            format!("databases of the manifest missing after the restore: {missing:?}"),
        ),
    }
}

/// `pg_amcheck` over every database: heap and B-tree indexes, each heap tuple looked up in
/// every index (`--heapallindexed`). The amcheck extension is installed where missing (it has
/// no tables, so the counts are unaffected).
pub async fn amcheck(pg: &PgParams) -> Result<(Outcome, String), AgentError> {
    let args = [
        "--all",
        "--install-missing",
        "--heapallindexed",
        "--no-password",
    ]
    .map(String::from);
    let mut tool = match spawn_tool(pg, "pg_amcheck", &args, false, true) {
        Ok(tool) => tool,
        Err(AgentError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok((
                Outcome::Skipped,
                "pg_amcheck not found (it ships with PostgreSQL 14 and newer)".into(),
            ));
        }
        Err(e) => return Err(e),
    };
    let mut stdout = tool.take_stdout()?;
    let mut report = Vec::new();
    let mut buf = [0u8; 8192];
    // Read to the end (the tool must not block on a full pipe), keep the start.
    loop {
        let n = stdout
            .read(&mut buf)
            .await
            .map_err(|e| AgentError::io("reading pg_amcheck's output", e))?;
        if n == 0 {
            break;
        }
        let room = AMCHECK_OUTPUT.saturating_sub(report.len());
        report.extend_from_slice(&buf[..n.min(room)]);
    }
    let report = String::from_utf8_lossy(&report).trim().to_string();
    Ok(match tool.finish().await {
        Ok(_) if report.is_empty() => (
            Outcome::Passed,
            "pg_amcheck --heapallindexed: heap and B-tree indexes of every database clean".into(),
        ),
        Ok(_) => (Outcome::Failed, report),
        Err(AgentError::Tool { status, stderr, .. }) => (
            Outcome::Failed,
            format!(
                "pg_amcheck failed ({status}): {}",
                [report, stderr].join("\n").trim()
            ),
        ),
        Err(e) => return Err(e),
    })
}

/// Counts every restored table and compares with the manifest. Returns the outcome, its
/// message and the restored (tables, rows) totals.
pub async fn counts(
    pg: &PgParams,
    manifest: &Manifest,
    present: &[String],
) -> Result<(Outcome, String, u64, u64), AgentError> {
    let mut recorded = Vec::new();
    let mut restored: Vec<(String, Vec<TableCount>)> = Vec::new();
    for file in &manifest.files {
        let Some(database) = &file.database else {
            continue;
        };
        recorded.push((database.clone(), file.tables.clone()));
        // A missing database fails `databases`; here its recorded tables show as missing.
        if !present.contains(database) {
            continue;
        }
        let client = pg.connect(database).await?;
        restored.push((
            database.clone(),
            counts::count_tables(&client, database).await?,
        ));
    }
    let tables = restored.iter().map(|(_, t)| t.len() as u64).sum();
    let rows = restored
        .iter()
        .flat_map(|(_, t)| t.iter().map(|t| t.rows))
        .sum();
    let (outcome, message) = compare_counts(&recorded, &restored);
    Ok((outcome, message, tables, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_of_the_manifest_absent_after_the_restore_fails() {
        let manifest = Manifest::from_json(
            br#"{"formatVersion": 1, "backupId": "b1", "namespace": "ns", "cluster": "db",
            "startedAt": "2026-11-22T02:00:00Z", "completedAt": "2026-11-22T02:01:00Z",
            "serverVersion": "15.14", "pgDumpVersion": "pg_dump (PostgreSQL) 15.14",
            "compression": "zstd", "files": [
              {"name": "globals.sql.zst", "kind": "globals", "sizeBytes": 1, "sha256": "00"},
              {"name": "db-app.pgdump.zst", "kind": "database", "database": "app",
               "sizeBytes": 1, "sha256": "00"},
              {"name": "db-reports.pgdump.zst", "kind": "database", "database": "reports",
               "sizeBytes": 1, "sha256": "00"}]}"#,
        )
        .expect("manifest");
        let all = ["postgres", "app", "reports"].map(String::from);
        assert_eq!(databases(&manifest, &all).0, Outcome::Passed);
        let (outcome, message) = databases(&manifest, &all[..2]);
        assert_eq!(outcome, Outcome::Failed);
        assert_eq!(
            message,
            "databases of the manifest missing after the restore: [\"reports\"]"
        );
    }
}
