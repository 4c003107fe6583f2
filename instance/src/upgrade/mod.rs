//! The mechanism of an online major-version upgrade (docs/src/design/major-upgrades.md): the
//! old primary publishes every database (`source`), the new side's primary copies the roles and
//! the schema and subscribes (`target`), and at the cut-over the old primary is made read-only,
//! its final position waited for and its sequences carried. Every step is idempotent, so an
//! interrupted upgrade is taken up again from its start.
//!
//! All SQL goes through `psql` and `pg_dump` with libpq connection strings: the new side reaches
//! the old primary over TLS with a client certificate, which libpq's keywords (`sslcert`,
//! `sslrootcert`) say and which the subscription itself needs in the same form.

pub mod source;
pub mod source_access;
pub mod stalled;
pub mod target;

use std::future::Future;
use std::path::PathBuf;
use std::process::Command;

use crate::error::Error;

/// The publication on the old primary and the subscription on the new one, in every database.
pub const PUBLICATION: &str = "tusk_upgrade";
pub const SUBSCRIPTION: &str = "tusk_upgrade";

/// The replication slot of one database's subscription: slot names are the whole server's, so
/// each database's carries its OID on the old primary.
pub fn slot_name(database_oid: u32) -> String {
    format!("tusk_upgrade_{database_oid}")
}

/// Runs a program to completion and returns its standard output; a non-zero exit is an error
/// with its stderr. The manager runs them through its reaper (it is PID 1), tests directly.
pub trait Runner {
    fn run(&self, cmd: Command, tool: &str) -> impl Future<Output = Result<String, Error>> + Send;
}

impl Runner for crate::reaper::Reaper {
    async fn run(&self, cmd: Command, tool: &str) -> Result<String, Error> {
        crate::reaper::Reaper::run(self, cmd, tool)
            .await
            .map(|o| o.stdout)
    }
}

/// Runs the tools directly, for a caller that is not PID 1 (tests): the manager's reaper would
/// reap the caller's other children too.
pub struct Direct;

impl Runner for Direct {
    async fn run(&self, mut cmd: Command, tool: &str) -> Result<String, Error> {
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .map_err(|e| Error::State(format!("{tool}: {e}")))?
            .map_err(Error::io(format!("starting {tool}")))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(Error::Tool {
            tool: tool.to_owned(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// A server as the tools reach it: a libpq connection string without `dbname`, and where the
/// PostgreSQL programs are.
#[derive(Clone, Debug)]
pub struct Server {
    pub conninfo: String,
    pub bin_dir: Option<PathBuf>,
}

/// A database of the old primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Database {
    pub name: String,
    pub oid: u32,
    pub owner: String,
}

impl Server {
    /// The connection string for `database`.
    pub fn to(&self, database: &str) -> String {
        format!("{} dbname={}", self.conninfo, conninfo_value(database))
    }

    fn program(&self, name: &str) -> Command {
        match &self.bin_dir {
            Some(dir) => Command::new(dir.join(name)),
            None => Command::new(name),
        }
    }

    /// One statement in `database` (its own transaction: `ALTER SYSTEM` refuses a block; several
    /// statements share one), as rows of fields (unit and record separators between them: a name may hold `|` or a
    /// newline). Tusk's own sessions write even on a server [`source::freeze`] made read-only.
    pub async fn query(
        &self,
        runner: &impl Runner,
        database: &str,
        sql: &str,
    ) -> Result<Vec<Vec<String>>, Error> {
        self.query_as(runner, database, sql, Session::Tusk).await
    }

    async fn query_as(
        &self,
        runner: &impl Runner,
        database: &str,
        sql: &str,
        session: Session,
    ) -> Result<Vec<Vec<String>>, Error> {
        let mut cmd = self.program("psql");
        if session == Session::Tusk {
            cmd.env("PGOPTIONS", TUSK_SESSION);
        }
        cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-F", FIELD, "-R", RECORD, "-d"])
            .arg(self.to(database))
            .args(["-c", sql]);
        let out = runner.run(cmd, "psql").await?;
        Ok(rows(&out))
    }

    /// Runs the SQL file `file` in `database` as one transaction: a failure leaves nothing of
    /// it behind, so the step that wrote it can simply run again.
    pub async fn run_file(
        &self,
        runner: &impl Runner,
        database: &str,
        file: &std::path::Path,
    ) -> Result<(), Error> {
        let mut cmd = self.program("psql");
        cmd.env("PGOPTIONS", TUSK_SESSION)
            .args([
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "--single-transaction",
                "-d",
            ])
            .arg(self.to(database))
            .arg("-f")
            .arg(file);
        runner.run(cmd, "psql").await.map(drop)
    }
}

/// Tusk's own sessions: writing even on a server [`source::freeze`] made read-only, and past
/// the guard against schema changes (`source_access`).
const TUSK_SESSION: &str = "-c default_transaction_read_only=off -c tusk.upgrade=on";

/// Whose defaults a session takes: Tusk's own, or a client's (what [`source::freeze`] checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Session {
    Tusk,
    Client,
}

const FIELD: &str = "\u{1f}";
const RECORD: &str = "\u{1e}";

/// psql's unaligned output split into rows and fields.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.trim_end_matches('\n')
        .split(RECORD)
        .filter(|row| !row.is_empty())
        .map(|row| row.split(FIELD).map(str::to_owned).collect())
        .collect()
}

/// A libpq connection-string value: quoted, with `\` and `'` escaped (a password or database
/// name may hold anything).
pub fn conninfo_value(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `"name"` as an SQL identifier.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'value'` as an SQL string literal (standard-conforming strings, as PostgreSQL ≥ 9.1 has).
pub fn literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_values_and_names_are_quoted() {
        assert_eq!(conninfo_value(r"pw'\1"), r"'pw\'\\1'");
        let server = Server {
            conninfo: "host=old port=5432".into(),
            bin_dir: None,
        };
        assert_eq!(server.to("shop db"), "host=old port=5432 dbname='shop db'");
        assert_eq!(ident(r#"a"b"#), r#""a""b""#);
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(slot_name(16384), "tusk_upgrade_16384");
        let out = format!("a|b{FIELD}1{RECORD}c\nd{FIELD}2\n");
        assert_eq!(rows(&out), [["a|b", "1"], ["c\nd", "2"]]);
        assert!(rows("\n").is_empty());
    }
}
