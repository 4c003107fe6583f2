//! What a base backup reads of its server, over a replication connection (issue 47, defect 1).
//! The replication role opens no ordinary session (`pg_hba` rejects it outside replication,
//! where its password alone once created slots), so the system identifier, the segment size and
//! the version come from the walsender: `IDENTIFY_SYSTEM` and `SHOW`, through `psql`, which
//! presents the role's client certificate as `pg_basebackup` does (`PGSSLCERT`/`PGSSLKEY`).

use tokio::io::AsyncReadExt;

use super::{PgParams, spawn_tool};
use crate::error::AgentError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationFacts {
    /// The database system identifier (decimal).
    pub system: String,
    /// `wal_segment_size`, in bytes.
    pub segment_size: u64,
    /// `server_version`, as the server reports it.
    pub version: String,
}

pub async fn replication_facts(pg: &PgParams) -> Result<ReplicationFacts, AgentError> {
    let args = [
        "-X",
        "-A",
        "-t",
        "-d",
        "replication=true",
        "-c",
        "IDENTIFY_SYSTEM",
        "-c",
        "SHOW wal_segment_size",
        "-c",
        "SHOW server_version",
    ]
    .map(str::to_owned);
    let mut psql = spawn_tool(pg, "psql", &args, false, true)?;
    let mut out = String::new();
    psql.take_stdout()?
        .read_to_string(&mut out)
        .await
        .map_err(|e| AgentError::io("reading psql's answer over replication", e))?;
    psql.finish().await?;
    parse(&out).map_err(|why| AgentError::Database(format!("over replication: {why}")))
}

/// `IDENTIFY_SYSTEM`'s row (`systemid|timeline|xlogpos|dbname`), then the two settings.
fn parse(out: &str) -> Result<ReplicationFacts, String> {
    let mut lines = out.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut next = |what: &str| lines.next().ok_or(format!("no {what} in {out:?}"));
    let identified = next("IDENTIFY_SYSTEM row")?;
    let system = identified.split('|').next().unwrap_or_default();
    if system.is_empty() || !system.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("IDENTIFY_SYSTEM answered {identified:?}"));
    }
    let size = next("wal_segment_size")?;
    let segment_size = bytes(size).ok_or(format!("wal_segment_size {size:?}"))?;
    let version = next("server_version")?.to_owned();
    Ok(ReplicationFacts {
        system: system.to_owned(),
        segment_size,
        version,
    })
}

/// A size as `SHOW` prints it (`16MB`, `1GB`, `512kB`).
fn bytes(shown: &str) -> Option<u64> {
    let split = shown.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = shown.split_at(split);
    let unit = match unit {
        "kB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walsenders_answers_give_the_system_its_segment_size_and_version() {
        let out = "7580046190001234567|1|0/3000148|\n16MB\n15.10 (Debian 15.10-0+deb12u1)\n";
        assert_eq!(
            parse(out),
            Ok(ReplicationFacts {
                system: "7580046190001234567".into(),
                segment_size: 16 << 20,
                version: "15.10 (Debian 15.10-0+deb12u1)".into(),
            })
        );
        let out = "7580046190001234567|1|0/3000148|\n1GB\n15.10\n";
        assert_eq!(parse(out).map(|f| f.segment_size), Ok(1 << 30));
        assert!(parse("").is_err());
        assert!(parse("psql: error\n16MB\n15\n").is_err());
        assert!(parse("7|1|0/1|\n16 MB\n15\n").is_err());
    }
}
