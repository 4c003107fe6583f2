//! The one-line reason a failed run leaves for Kubernetes: written to the container's
//! termination-message file, where the kubelet copies it into the pod's
//! `state.terminated.message` and the operator reads it into the cluster's or Backup's status.
//!
//! `verify-restore` leaves its JSON report there instead, success or not ([`record_json`]).
//!
//! The file is named by `TUSK_TERMINATION_LOG` (the Job sets `/dev/termination-log`); without it
//! nothing is written, so a local run leaves no files behind. The text is the error the summary
//! line already prints, which never contains credentials (they only come from the environment).

use std::path::Path;

/// The variable naming the termination-message file.
pub const ENV: &str = "TUSK_TERMINATION_LOG";
/// Bytes kept: the kubelet keeps at most 4096 per container; a condition message stays readable.
pub const MAX_BYTES: usize = 1024;

/// `message` on one line (line breaks become `; `), at most [`MAX_BYTES`] bytes.
pub fn one_line(message: &str) -> String {
    let joined = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if joined.len() <= MAX_BYTES {
        return joined;
    }
    let mut end = MAX_BYTES - '…'.len_utf8();
    while !joined.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &joined[..end])
}

/// Writes `message` (made one line) to the file named by [`ENV`], if set. A failure to write is
/// logged, never fatal: the exit code and the log still tell what happened.
pub fn record(message: &str) {
    let Some(path) = std::env::var_os(ENV).filter(|p| !p.is_empty()) else {
        return;
    };
    write_to(Path::new(&path), message);
}

/// Writes a JSON document as is (`verify-restore`'s report, kept within the kubelet's 4096
/// bytes by its writer) to the file named by [`ENV`], if set.
pub fn record_json(json: &str) {
    let Some(path) = std::env::var_os(ENV).filter(|p| !p.is_empty()) else {
        return;
    };
    write_raw(Path::new(&path), json);
}

fn write_to(path: &Path, message: &str) {
    write_raw(path, &one_line(message));
}

fn write_raw(path: &Path, text: &str) {
    if let Err(e) = std::fs::write(path, text) {
        eprintln!(
            "backup-agent: cannot write the termination message to {}: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_lines_and_caps_length() {
        assert_eq!(
            one_line("pg_restore failed (exit status: 1): \n  ERROR: x\n\nDETAIL: y\n"),
            "pg_restore failed (exit status: 1):; ERROR: x; DETAIL: y"
        );
        let long = "é".repeat(MAX_BYTES);
        let capped = one_line(&long);
        assert!(capped.len() <= MAX_BYTES, "{}", capped.len());
        assert!(capped.ends_with('…'));
    }

    #[test]
    fn writes_the_one_line_reason() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("termination-log");
        write_to(&path, "integrity check failed: a\nb");
        let written = std::fs::read_to_string(&path).expect("written");
        assert_eq!(written, "integrity check failed: a; b");
    }
}
