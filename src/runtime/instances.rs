//! What the operator remembers and reads about database instances between reconciles: when it
//! last saw each primary Lease change (on its own clock), and the instance managers' `/status`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub use tusk_contract::{InstanceStatus, Lsns, PostgresState, Role};

/// When each Lease was last seen to change, by the operator's monotonic clock. A Lease never
/// seen before counts as changed now: after an operator restart a failover waits one full
/// Lease duration, which is safe, never early.
#[derive(Default)]
pub struct LeaseClock {
    seen: Mutex<HashMap<String, (String, Instant)>>,
}

impl LeaseClock {
    /// Records `version` (the Lease's resourceVersion) for `key` and returns how long the Lease
    /// has been unchanged.
    pub fn observe(&self, key: &str, version: &str) -> Duration {
        self.observe_at(key, version, Instant::now())
    }

    fn observe_at(&self, key: &str, version: &str, now: Instant) -> Duration {
        // A poisoned map only loses observations, which makes failovers later, not wrong.
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match seen.get(key) {
            Some((known, since)) if known == version => now.saturating_duration_since(*since),
            _ => {
                seen.insert(key.to_owned(), (version.to_owned(), now));
                Duration::ZERO
            }
        }
    }

    /// Forgets `key`: after a handover the next holder starts with a fresh observation.
    pub fn forget(&self, key: &str) {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.remove(key);
    }
}

/// Where the operator reads the instance managers' reports (a trait, so that scenarios can
/// answer for instances that do not run).
#[async_trait::async_trait]
pub trait StatusSource: Send + Sync {
    /// The report of the manager at pod IP `ip`, or `None` when it does not answer in time.
    async fn report(&self, ip: &str) -> Option<InstanceStatus>;
}

/// Reads instance managers' `/status` over the pod network.
pub struct InstanceReader {
    http: reqwest::Client,
    port: i32,
}

impl InstanceReader {
    pub fn new(port: i32) -> Self {
        // One second: an instance that cannot answer that fast is not a promotion candidate.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .unwrap_or_default();
        Self { http, port }
    }
}

#[async_trait::async_trait]
impl StatusSource for InstanceReader {
    async fn report(&self, ip: &str) -> Option<InstanceStatus> {
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.to_owned()
        };
        let url = format!("http://{host}:{}/status", self.port);
        let response = self.http.get(url).send().await.ok()?;
        response.error_for_status().ok()?.json().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_unchanged_only_while_its_version_stays() {
        let clock = LeaseClock::default();
        let start = Instant::now();
        assert_eq!(clock.observe_at("prod/demo", "1", start), Duration::ZERO);
        let later = start + Duration::from_secs(4);
        assert_eq!(
            clock.observe_at("prod/demo", "1", later),
            Duration::from_secs(4)
        );
        assert_eq!(clock.observe_at("prod/demo", "2", later), Duration::ZERO);
        let after = later + Duration::from_secs(2);
        assert_eq!(
            clock.observe_at("prod/demo", "2", after),
            Duration::from_secs(2)
        );
        clock.forget("prod/demo");
        assert_eq!(clock.observe_at("prod/demo", "2", after), Duration::ZERO);
    }
}
