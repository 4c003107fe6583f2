//! The operator's write requests, counted from the API server's audit log (one JSON event a
//! line; e2e/local/up.sh logs the requests of the operator's ServiceAccount).

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use crate::{Context, Result};

pub const OPERATOR_USER: &str = "system:serviceaccount:tusk-system:tusk-operator";
const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

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
    let mut file = std::fs::File::open(log).context(format!("audit log {}", log.display()))?;
    file.seek(SeekFrom::Start(mark))?;
    let mut writes = Vec::new();
    for line in BufReader::new(file).lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line?) else {
            continue; // a line being written while we read
        };
        if let Some(write) = operator_write(&event) {
            writes.push(write);
        }
    }
    Ok(writes)
}

fn operator_write(event: &serde_json::Value) -> Option<Write> {
    let text = |pointer: &str| {
        event
            .pointer(pointer)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    };
    let verb = text("/verb");
    if text("/user/username") != OPERATOR_USER
        || !WRITE_VERBS.contains(&verb)
        || text("/objectRef/resource") == "leases"
    {
        return None;
    }
    Some(Write {
        verb: verb.to_string(),
        uri: text("/requestURI").to_string(),
        code: event
            .pointer("/responseStatus/code")
            .and_then(|v| v.as_i64())
            .unwrap_or_default(),
    })
}
