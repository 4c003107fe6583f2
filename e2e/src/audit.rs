//! The operator's write requests, counted from the API server's audit log (one JSON event a
//! line; e2e/local/up.sh logs the requests of the operator's ServiceAccount).

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use crate::{Context, Result};

pub const OPERATOR_USER: &str = "system:serviceaccount:tusk-system:tusk-operator";
const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];
const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// One write request of the operator.
#[derive(Debug, Clone)]
pub struct Write {
    pub verb: String,
    pub uri: String,
    pub code: i64,
}

impl std::fmt::Display for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.verb, self.uri, self.code)
    }
}

/// A mark is a byte offset in the audit log.
pub fn mark(log: &Path) -> Result<u64> {
    Ok(std::fs::metadata(log)
        .context(format!("audit log {}", log.display()))?
        .len())
}

/// The operator's create/update/patch/delete requests logged after `mark`, Lease renewals
/// excluded (leader election is not a reconcile write).
pub fn writes_since(log: &Path, mark: u64) -> Result<Vec<Write>> {
    let mut writes = Vec::new();
    for_each_since(log, mark, |event| writes.extend(operator_write(event)))?;
    Ok(writes)
}

/// How many requests the operator made, reads (get, list, watch) and writes apart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Requests {
    pub reads: u64,
    /// Writes other than Lease renewals.
    pub writes: u64,
}

/// The operator's requests logged after `mark`, counted.
pub fn requests_since(log: &Path, mark: u64) -> Result<Requests> {
    requests_of_since(log, OPERATOR_USER, mark)
}

/// The requests of `user` (another operator's ServiceAccount) logged after `mark`, counted.
pub fn requests_of_since(log: &Path, user: &str, mark: u64) -> Result<Requests> {
    let mut requests = Requests::default();
    for_each_since(log, mark, |event| {
        if write_of(event, user).is_some() {
            requests.writes += 1;
        } else if is_read_of(event, user) {
            requests.reads += 1;
        }
    })?;
    Ok(requests)
}

/// Calls `f` with every event logged after `mark`.
pub(crate) fn for_each_since(
    log: &Path,
    mark: u64,
    mut f: impl FnMut(&serde_json::Value),
) -> Result {
    let mut file = std::fs::File::open(log).context(format!("audit log {}", log.display()))?;
    file.seek(SeekFrom::Start(mark))?;
    for line in BufReader::new(file).lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line?) else {
            continue; // a line being written while we read
        };
        f(&event);
    }
    Ok(())
}

fn text<'a>(event: &'a serde_json::Value, pointer: &str) -> &'a str {
    event
        .pointer(pointer)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
}

fn is_read_of(event: &serde_json::Value, user: &str) -> bool {
    text(event, "/user/username") == user
        && READ_VERBS.contains(&text(event, "/verb"))
        // A watch is logged when it starts and again when it ends: count it once.
        && text(event, "/stage") != "ResponseStarted"
}

fn operator_write(event: &serde_json::Value) -> Option<Write> {
    write_of(event, OPERATOR_USER)
}

fn write_of(event: &serde_json::Value, user: &str) -> Option<Write> {
    let verb = text(event, "/verb");
    if text(event, "/user/username") != user
        || !WRITE_VERBS.contains(&verb)
        || text(event, "/objectRef/resource") == "leases"
    {
        return None;
    }
    Some(Write {
        verb: verb.to_string(),
        uri: text(event, "/requestURI").to_string(),
        code: event
            .pointer("/responseStatus/code")
            .and_then(|v| v.as_i64())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_once_reads_and_writes_apart() {
        let event = |user: &str, verb: &str, resource: &str, stage: &str| {
            serde_json::json!({"user": {"username": user}, "verb": verb, "stage": stage,
                "objectRef": {"resource": resource}, "requestURI": "/x"})
            .to_string()
        };
        let lines = [
            event(OPERATOR_USER, "list", "statefulsets", "ResponseComplete"),
            event(OPERATOR_USER, "watch", "statefulsets", "ResponseStarted"),
            event(OPERATOR_USER, "watch", "statefulsets", "ResponseComplete"),
            event(OPERATOR_USER, "patch", "statefulsets", "ResponseComplete"),
            event(OPERATOR_USER, "update", "leases", "ResponseComplete"),
            event("admin", "create", "postgresqls", "ResponseComplete"),
            "{not json".to_string(),
        ];
        let dir = std::env::temp_dir().join(format!("tusk-audit-{}", std::process::id()));
        std::fs::write(&dir, lines.join("\n")).unwrap();
        let counted = requests_since(&dir, 0).unwrap();
        // Another operator's account (a peer of the scale benchmark) is counted apart.
        let admin = requests_of_since(&dir, "admin", 0).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(
            admin,
            Requests {
                reads: 0,
                writes: 1
            }
        );
        assert_eq!(
            counted,
            Requests {
                reads: 2,
                writes: 1
            }
        );
    }
}
