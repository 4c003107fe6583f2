//! `tusk-instance wal-push %p`: PostgreSQL's `archive_command`. It holds no credentials and
//! opens no bucket: it asks the manager's archiver ([`crate::archiver`]) over its socket and
//! succeeds only when the answer is that the file is durable. It never waits for ever (a hung
//! `archive_command` stops archiving silently): past the timeout it fails, and PostgreSQL
//! retries.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Longer than any upload of one segment should take; PostgreSQL retries after it.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// Asks the archiver to archive `file` (relative paths are PostgreSQL's, from PGDATA, the
/// archiver's working directory). The answer after `ok`, or why it failed.
pub fn push(file: &Path, socket_dir: &Path, timeout: Duration) -> Result<String, String> {
    let path = std::env::current_dir()
        .map_err(|e| format!("the working directory: {e}"))?
        .join(file);
    let path = path
        .to_str()
        .filter(|p| !p.contains('\n'))
        .ok_or_else(|| format!("{} is not a path the archiver takes", path.display()))?;
    let socket = crate::archive_socket::socket_path(socket_dir);
    let failed = |what: &str, e: std::io::Error| format!("{what} {}: {e}", socket.display());
    let mut stream = UnixStream::connect(&socket).map_err(|e| failed("connecting to", e))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| failed("configuring", e))?;
    stream
        .write_all(format!("push {path}\n").as_bytes())
        .map_err(|e| failed("writing to", e))?;
    let mut reply = String::new();
    BufReader::new(stream)
        .read_line(&mut reply)
        .map_err(|e| failed("waiting for", e))?;
    match reply.trim_end().split_once(' ') {
        Some(("ok", outcome)) => Ok(outcome.to_owned()),
        Some(("error", why)) => Err(why.to_owned()),
        _ => Err(format!("the archiver answered {reply:?}")),
    }
}
