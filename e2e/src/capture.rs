//! A packet capture on the e2e node (Debian's tcpdump, run by the test as root): what crosses
//! the pod network, to show that nothing readable does. It listens on every interface (`-i
//! any`): the pod bridge and each pod's veth, since frames the bridge switches between two
//! pods never reach the bridge device itself.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::{Context, Level, Result, absent, fail};

fn tcpdump() -> String {
    std::env::var("TUSK_TCPDUMP_BIN").unwrap_or_else(|_| "tcpdump".into())
}

/// A running capture into a pcap file.
pub struct Capture {
    child: Child,
    file: PathBuf,
}

/// A finished capture: its file and raw bytes (headers and payloads).
pub struct Captured {
    pub file: PathBuf,
    pub bytes: Vec<u8>,
}

impl Capture {
    /// Starts capturing whole packets matching the pcap `filter` into `file` and returns once
    /// tcpdump says it listens. Skips when this machine has no tcpdump or the test is not root.
    pub async fn start(file: PathBuf, filter: &str) -> Result<Self> {
        // /proc/self belongs to the effective user.
        if std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(u32::MAX)
            != 0
        {
            return Err(absent(Level::Node, "a capture needs root"));
        }
        let mut child = Command::new(tcpdump())
            // -U: each packet written as it comes (nothing lost in a buffer at the stop);
            // -Z root: write the file as root (Debian's tcpdump drops to its own user).
            .args(["-i", "any", "-nn", "-s", "0", "-U", "-Z", "root", "-w"])
            .arg(&file)
            .arg(filter)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context(format!("starting tcpdump ({})", tcpdump()))?;
        let stderr = child.stderr.take().context("tcpdump's stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let listening = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if line.contains("listening on") {
                    return Ok::<_, std::io::Error>(true);
                }
            }
            Ok(false)
        })
        .await;
        match listening {
            Ok(Ok(true)) => {}
            other => fail!("tcpdump did not start listening: {other:?}"),
        }
        // Its last words (the packet counts) go nowhere rather than filling a pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self { child, file })
    }

    /// Stops the capture (SIGINT: tcpdump closes the file cleanly) and reads it.
    pub async fn stop(mut self) -> Result<Captured> {
        if let Some(pid) = self.child.id() {
            let status = Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .status()
                .await?;
            if !status.success() {
                fail!("kill -INT {pid}: {status}");
            }
        }
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .context("tcpdump did not stop within 30 s")??;
        let bytes = tokio::fs::read(&self.file)
            .await
            .context(format!("reading {}", self.file.display()))?;
        Ok(Captured {
            file: self.file.clone(),
            bytes,
        })
    }
}

impl Captured {
    /// How many times `needle` appears in the capture's bytes.
    pub fn occurrences(&self, needle: &[u8]) -> usize {
        occurrences(&self.bytes, needle)
    }

    /// How many captured packets match the pcap `filter` (tcpdump reading the file).
    pub async fn packets(&self, filter: &str) -> Result<usize> {
        let out = Command::new(tcpdump())
            .args(["-nn", "-r"])
            .arg(&self.file)
            .arg(filter)
            .stderr(Stdio::null())
            .output()
            .await?;
        if !out.status.success() {
            fail!("tcpdump -r {}: {}", self.file.display(), out.status);
        }
        Ok(out.stdout.iter().filter(|b| **b == b'\n').count())
    }
}

/// How many times `needle` appears in `haystack` (overlapping occurrences each count).
pub fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    if needle.is_empty() {
        return 0;
    }
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

#[cfg(test)]
mod tests {
    use super::occurrences;

    #[test]
    fn counts_every_occurrence_and_none_of_an_empty_needle() {
        assert_eq!(occurrences(b"abcabcab", b"abc"), 2);
        assert_eq!(occurrences(b"aaaa", b"aa"), 3);
        assert_eq!(occurrences(b"abc", b""), 0);
        assert_eq!(occurrences(b"ab", b"abc"), 0);
    }
}
