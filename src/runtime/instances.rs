//! What the operator remembers and reads about database instances between reconciles: when it
//! last saw each primary Lease change (on its own clock), and the instance managers' `/status`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub use tusk_contract::status::ArchiveStatus;
pub use tusk_contract::{InstanceStatus, Lsns, PostgresState, Role};

/// When each Lease was last seen to change, by the operator's monotonic clock. A Lease never
/// seen before counts as changed now: after an operator restart a failover waits one full
/// Lease duration, which is safe, never early.
#[derive(Default)]
pub struct LeaseClock {
    seen: Mutex<HashMap<String, (String, Instant)>>,
    /// Since when each cluster's holder has been seen not serving.
    unready: Mutex<HashMap<String, Instant>>,
    /// Since when each switchover (by its Lease key and target) has been seen in progress.
    switching: Mutex<HashMap<String, (String, Instant)>>,
    /// How soon each cluster's primary step wants to look again, for the error policy: a
    /// failing later step must not delay a failover by its backoff.
    rechecks: Mutex<HashMap<String, Duration>>,
}

/// A map guarded by a mutex; a poisoned one only loses observations, which makes failovers
/// later, never earlier.
fn locked<T>(map: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LeaseClock {
    /// Records `version` (the Lease's resourceVersion) for `key` and returns how long the Lease
    /// has been unchanged.
    pub fn observe(&self, key: &str, version: &str) -> Duration {
        self.observe_at(key, version, Instant::now())
    }

    fn observe_at(&self, key: &str, version: &str, now: Instant) -> Duration {
        let mut seen = locked(&self.seen);
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
        locked(&self.seen).remove(key);
        locked(&self.unready).remove(key);
    }

    /// Records that the holder of `key` does not serve, and returns for how long it has not.
    pub fn unready_for(&self, key: &str) -> Duration {
        let now = Instant::now();
        let since = *locked(&self.unready).entry(key.to_owned()).or_insert(now);
        now.saturating_duration_since(since)
    }

    /// The holder of `key` serves.
    pub fn serving(&self, key: &str) {
        locked(&self.unready).remove(key);
    }

    /// How long the switchover to `target` on `key` has been seen in progress, on this
    /// operator's clock (so its timeout never depends on two hosts' wall clocks; a restarted
    /// operator starts counting again: later, never earlier). `None` forgets it.
    pub fn switching_for(&self, key: &str, target: Option<&str>) -> Duration {
        let mut switching = locked(&self.switching);
        let Some(target) = target else {
            switching.remove(key);
            return Duration::ZERO;
        };
        let now = Instant::now();
        match switching.get(key) {
            Some((known, since)) if known == target => now.saturating_duration_since(*since),
            _ => {
                switching.insert(key.to_owned(), (target.to_owned(), now));
                Duration::ZERO
            }
        }
    }

    /// Remembers how soon the primary step of `key` wants to look again (`None`: no hurry).
    pub fn want_recheck(&self, key: &str, after: Option<Duration>) {
        let mut rechecks = locked(&self.rechecks);
        match after {
            Some(after) => rechecks.insert(key.to_owned(), after),
            None => rechecks.remove(key),
        };
    }

    /// How soon the primary step of `key` last wanted to look again.
    pub fn recheck(&self, key: &str) -> Option<Duration> {
        locked(&self.rechecks).get(key).copied()
    }
}

/// Which instance manager to ask, and how to trust it.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceAddress {
    pub namespace: String,
    pub cluster: String,
    pub pod: String,
    pub ip: String,
    /// Whether the pod's manager serves TLS and wants the status token (the pods of an
    /// earlier Tusk serve plain HTTP until the rollout replaces them).
    pub tls: bool,
    /// The name its certificate carries and is verified by: `<pod>.<cluster>-hl.<ns>.svc`.
    pub server_name: String,
    /// The Secret whose `ca.crt` signs that certificate.
    pub server_secret: String,
    /// The Secret holding the status token.
    pub token_secret: String,
    /// The fingerprint of the CA bundle the server Secret holds now, as the cache knows it
    /// (`None`: not known, as for a Secret the user brings): a remembered CA of another bundle
    /// is read again before it is used, so a CA rotation never costs a refused read.
    pub ca_fingerprint: Option<String>,
}

/// Where the operator reads the instance managers' reports (a trait, so that scenarios can
/// answer for instances that do not run).
#[async_trait::async_trait]
pub trait StatusSource: Send + Sync {
    /// The report of the manager at `address`, or `None` when it does not answer in time.
    async fn report(&self, address: &InstanceAddress) -> Option<InstanceStatus>;

    /// Asks the manager at `address` for an archive continuity check now (`POST
    /// /archive/check`); whether it accepted. Sources without managers accept nothing.
    async fn ask_archive_check(&self, _address: &InstanceAddress) -> bool {
        false
    }

    /// One of an online upgrade's requests to the manager at `address`
    /// (`tusk_contract::upgrade`, `upgrade_source`, `upgrade_target`); `None` when it does not
    /// answer in time. Sources without managers answer nothing.
    async fn upgrade_request(
        &self,
        _address: &InstanceAddress,
        _request: &UpgradeRequest,
    ) -> Option<UpgradeAnswer> {
        None
    }
}

/// An online upgrade's request: `GET path` without a body, `POST path` with one (JSON, possibly
/// empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeRequest {
    pub path: &'static str,
    pub body: Option<String>,
}

impl UpgradeRequest {
    pub fn get(path: &'static str) -> Self {
        UpgradeRequest { path, body: None }
    }

    pub fn post(path: &'static str, body: String) -> Self {
        UpgradeRequest {
            path,
            body: Some(body),
        }
    }
}

/// A manager's answer: its status code and body (JSON when it succeeded, the reason when not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeAnswer {
    pub status: u16,
    pub body: String,
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
