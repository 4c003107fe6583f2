//! Runs the built `backup-agent` binary with a clean environment.

use std::process::{Command, Output};

use super::postgres::{PASSWORD, PgServer};
use super::stores::TestStore;

pub const NAMESPACE: &str = "tests";

/// The agent binary with an empty environment except a PATH that finds the PostgreSQL tools.
pub fn bare_agent() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_backup-agent"));
    let path = format!(
        "{}:{}",
        super::postgres::bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env_clear().env("PATH", path);
    cmd
}

/// The agent configured for `store`, cluster `cluster` and database server `pg` via env only.
pub fn agent(store: &TestStore, cluster: &str, pg: Option<&PgServer>) -> Command {
    let mut cmd = bare_agent();
    cmd.env("RUST_LOG", "info")
        .env("TUSK_NAMESPACE", NAMESPACE)
        .env("TUSK_CLUSTER", cluster)
        .env("TUSK_PATH", "nightly")
        .env("TUSK_CONNECT_TIMEOUT", "5s");
    for (k, v) in store.agent_env() {
        cmd.env(k, v);
    }
    if let Some(pg) = pg {
        cmd.env("PGHOST", "127.0.0.1")
            .env("PGPORT", pg.port.to_string())
            .env("PGUSER", "postgres")
            .env("PGPASSWORD", PASSWORD);
    }
    cmd
}

/// The agent for cluster `db` on server `pg`, with the arguments of `command_line` (split at
/// spaces: no argument of these tests contains one).
pub fn db_agent(store: &TestStore, pg: &PgServer, command_line: &str) -> Command {
    let mut cmd = agent(store, "db", Some(pg));
    cmd.args(command_line.split_whitespace());
    cmd
}

/// Runs the agent; every run also checks that no secret reached its output.
pub fn run(mut cmd: Command) -> Output {
    let out = cmd.output().expect("run backup-agent");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!(
        "backup-agent exited {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    assert_no_secrets(&stdout);
    assert_no_secrets(&stderr);
    out
}

pub fn assert_no_secrets(text: &str) {
    for secret in [
        PASSWORD,
        super::minio::SECRET_KEY,
        "app-pw",
        "wrong-password",
        "not-the-secret",
    ] {
        assert!(
            !text.contains(secret),
            "a secret leaked into the agent's output: {secret}"
        );
    }
}

/// Runs and asserts success; returns the summary JSON's `details`.
pub fn run_ok(cmd: Command) -> serde_json::Value {
    let out = run(cmd);
    assert!(out.status.success(), "backup-agent failed");
    summary(&out)["details"].clone()
}

/// Runs, asserts exit `code` and an error naming `cause`; returns the error for further checks.
/// Every failure must also leave that error, on one line, as the pod's termination message.
pub fn run_fails(mut cmd: Command, code: i32, cause: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("termination-log");
    cmd.env("TUSK_TERMINATION_LOG", &log);
    let out = run(cmd);
    let error = error_of(&out);
    assert_eq!(out.status.code(), Some(code), "{error}");
    assert!(error.contains(cause), "expected {cause:?} in: {error}");
    let message = std::fs::read_to_string(&log).expect("a termination message was written");
    assert_eq!(message, backup_agent::termination::one_line(&error));
    assert_no_secrets(&message);
    error
}

/// Runs a command line clap refuses: exit 2 and the refusal as the termination message.
pub fn run_refused(mut cmd: Command, cause: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("termination-log");
    cmd.env("TUSK_TERMINATION_LOG", &log);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(2));
    let message = std::fs::read_to_string(&log).expect("a termination message was written");
    assert!(message.contains(cause), "expected {cause:?} in: {message}");
    assert!(
        !message.contains('\n') && !message.contains("Usage:"),
        "{message}"
    );
    message
}

pub fn error_of(out: &Output) -> String {
    summary(out)["error"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub fn summary(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().expect("a summary line on stdout");
    serde_json::from_str(line).expect("summary is JSON")
}
