//! Periodic progress log lines (bytes and rate) for long transfers.

use std::time::{Duration, Instant};

const INTERVAL: Duration = Duration::from_secs(10);

pub struct Progress {
    label: String,
    started: Instant,
    last_log: Instant,
    bytes: u64,
}

impl Progress {
    pub fn new(label: impl Into<String>) -> Self {
        let now = Instant::now();
        Progress {
            label: label.into(),
            started: now,
            last_log: now,
            bytes: 0,
        }
    }

    pub fn add(&mut self, n: usize) {
        self.bytes += n as u64;
        if self.last_log.elapsed() >= INTERVAL {
            self.last_log = Instant::now();
            self.log("in progress");
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn log(&self, what: &str) {
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = self.bytes as f64 / secs / (1024.0 * 1024.0);
        tracing::info!(
            file = %self.label,
            bytes = self.bytes,
            seconds = format!("{secs:.1}"),
            mib_per_s = format!("{rate:.1}"),
            "{what}"
        );
    }
}
