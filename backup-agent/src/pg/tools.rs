//! Running pg_dump, pg_dumpall, pg_restore and psql with credentials passed through env only.

use std::process::Stdio;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use super::PgParams;
use crate::error::AgentError;

/// Keeps the end of a tool's stderr for error messages without unbounded memory.
const STDERR_TAIL: usize = 8 * 1024;

pub struct ToolOutput {
    pub child: Child,
    pub name: String,
    pub stderr: JoinHandle<String>,
}

impl ToolOutput {
    /// The stdin pipe (spawned with `stdin` piped).
    pub fn take_stdin(&mut self) -> Result<ChildStdin, AgentError> {
        piped(self.child.stdin.take(), &self.name, "stdin")
    }

    /// The stdout pipe (spawned with `stdout` piped).
    pub fn take_stdout(&mut self) -> Result<ChildStdout, AgentError> {
        piped(self.child.stdout.take(), &self.name, "stdout")
    }

    /// Waits for exit; a non-zero status becomes [`AgentError::Tool`] with stderr's tail.
    pub async fn finish(mut self) -> Result<String, AgentError> {
        let status = self
            .child
            .wait()
            .await
            .map_err(|e| AgentError::io(format!("waiting for {}", self.name), e))?;
        let stderr = self.stderr.await.unwrap_or_default();
        if status.success() {
            Ok(stderr)
        } else {
            Err(AgentError::Tool {
                tool: self.name,
                status: status.to_string(),
                stderr: stderr.trim().to_string(),
            })
        }
    }
}

/// A missing pipe means a spawn bug, not bad input.
fn piped<T>(pipe: Option<T>, tool: &str, which: &str) -> Result<T, AgentError> {
    pipe.ok_or_else(|| AgentError::Other(format!("{tool} has no {which} pipe")))
}

fn command(params: &PgParams, tool: &str) -> Command {
    let program = match &params.bin_dir {
        Some(dir) => dir.join(tool).into_os_string(),
        None => tool.into(),
    };
    let mut cmd = Command::new(program);
    cmd.env("PGHOST", &params.host)
        .env("PGPORT", params.port.to_string())
        .env("PGUSER", &params.user)
        .env("PGDATABASE", &params.maintenance_db)
        .env("PGAPPNAME", "tusk-backup-agent")
        .env("PGSSLMODE", params.ssl_mode.for_tools())
        .env_remove("PGPASSWORD")
        .env_remove("PGHOSTADDR")
        .env_remove("PGSSLROOTCERT")
        .env_remove("PGSSLCERT")
        .env_remove("PGSSLKEY")
        .env_remove("PGCHANNELBINDING");
    if let Some((cert, key)) = &params.client_certificate {
        cmd.env("PGSSLCERT", cert).env("PGSSLKEY", key);
    }
    if let Some(addr) = params.hostaddr {
        cmd.env("PGHOSTADDR", addr.to_string());
    }
    if let Some(root) = &params.ssl_root_cert {
        cmd.env("PGSSLROOTCERT", root);
    }
    if params.ssl_mode.requires_tls() {
        // As the agent's own connections: no password to a server that cannot prove it is
        // the one the certificate names.
        cmd.env("PGCHANNELBINDING", "require");
    }
    if let Some(password) = &params.password {
        cmd.env("PGPASSWORD", password.expose());
    }
    cmd
}

/// Spawns `tool args…` with piped stdin/stdout as requested and stderr captured.
pub fn spawn_tool(
    params: &PgParams,
    tool: &str,
    args: &[String],
    stdin: bool,
    stdout: bool,
) -> Result<ToolOutput, AgentError> {
    let mut cmd = command(params, tool);
    cmd.args(args)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(if stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped())
        // A cancelled pipeline must not leave a dump running.
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        AgentError::io(
            format!("starting {tool} (is the PostgreSQL client installed?)"),
            e,
        )
    })?;
    let mut pipe = child.stderr.take();
    let stderr = tokio::spawn(async move {
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = [0u8; 4096];
        if let Some(pipe) = pipe.as_mut() {
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
        }
        String::from_utf8_lossy(&tail).into_owned()
    });
    Ok(ToolOutput {
        child,
        name: tool.to_string(),
        stderr,
    })
}

/// First line of `tool --version`, e.g. "pg_dump (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)".
pub async fn tool_version(params: &PgParams, tool: &str) -> Result<String, AgentError> {
    let out = command(params, tool)
        .arg("--version")
        .output()
        .await
        .map_err(|e| {
            AgentError::io(
                format!("running {tool} --version (is the PostgreSQL client installed?)"),
                e,
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().next().unwrap_or_default().trim().to_string())
}

/// Major version from a `--version` line ("… 15.14 …" → 15, "… 9.6.2" → 9).
pub fn parse_major(version_line: &str) -> Option<u32> {
    let word = version_line
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A libpq conninfo `dbname='…'` value, so any database name survives `-d`.
pub fn quote_conninfo(database: &str) -> String {
    format!(
        "dbname='{}'",
        database.replace('\\', "\\\\").replace('\'', "\\'")
    )
}

/// SQL identifier quoting.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majors() {
        assert_eq!(
            parse_major("pg_dump (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)"),
            Some(15)
        );
        assert_eq!(parse_major("pg_dump (PostgreSQL) 18beta1"), Some(18));
        assert_eq!(parse_major("nothing"), None);
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_conninfo(r"a'b\c"), r"dbname='a\'b\\c'");
        assert_eq!(quote_ident("we\"ird"), "\"we\"\"ird\"");
    }
}
