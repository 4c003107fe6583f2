//! Helpers of the instance tests that know nothing of clusters: psql and HTTP against a port,
//! waiting on a condition, free ports, logs.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::pg_bin_dir;

/// Runs SQL over TCP on 127.0.0.1:`port` with a password; Err carries psql's stderr.
pub fn psql_on(
    port: u16,
    user: &str,
    password: &str,
    db: &str,
    sql: &str,
) -> Result<String, String> {
    let mut psql = Command::new(pg_bin_dir().join("psql"));
    psql.args(tusk_testkit::PSQL_SCRIPT)
        .args(["-h", "127.0.0.1"])
        .args(["-p", &port.to_string(), "-U", user, "-d", db, "-c", sql])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "3");
    output_of(psql)
}

/// Runs a psql command: its trimmed stdout, or its stderr as the error.
pub fn output_of(mut psql: Command) -> Result<String, String> {
    let out = psql.output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

pub fn dump(name: &str, log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    eprintln!(
        "===== {name} ({}) =====\n{text}===== end of {name} =====",
        log.display()
    );
}

/// Polls `ready` every 100 ms until it holds, panicking after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < timeout, "{what}: not after {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// Whether `done` holds within `timeout` (for a test that reports its own diagnostics).
pub fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

/// The status token the test managers are given (`TUSK_STATUS_TOKEN_FILE`).
pub const STATUS_TOKEN: &str = "test-status-token";

/// GET `path` on the manager's status port (TLS, with the status token; the server's
/// certificate is not checked here: `status_port.rs` checks it): the body, or None when the
/// server is not answering.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "5"])
        .args(["-H", &format!("Authorization: Bearer {STATUS_TOKEN}")])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `POST path` with the status token and `body` (JSON): the status code and the answer's body.
pub fn http_post(port: u16, path: &str, body: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "60", "-X", "POST"])
        .args(["-H", &format!("Authorization: Bearer {STATUS_TOKEN}")])
        .args(["-H", "Content-Type: application/json", "--data", body])
        .args(["-w", "\n%{http_code}"])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (answer, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), answer.to_owned())
}

/// A free port below the ephemeral range, claimed across the test executables running side by
/// side (`tusk_testkit::free_port`).
pub use tusk_testkit::free_port;
