//! Per-object exponential backoff for failed reconciles: transient errors retry quickly at
//! first, then slower, up to a cap, with jitter so many clusters do not retry in lockstep.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use rand::RngExt;

/// Failure counts of the objects of kind `K` whose last reconcile failed.
#[derive(Debug)]
pub struct ErrorBackoff<K: Resource<DynamicType = ()>> {
    base: Duration,
    cap: Duration,
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
}

impl<K: Resource<DynamicType = ()>> Default for ErrorBackoff<K> {
    fn default() -> Self {
        Self::new(Duration::from_secs(2), Duration::from_secs(300))
    }
}

impl<K: Resource<DynamicType = ()>> ErrorBackoff<K> {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records one more failure of `key` and returns how long to wait before retrying.
    pub fn next_delay(&self, key: &ObjectRef<K>) -> Duration {
        let failures = {
            let mut map = self
                .failures
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let count = map.entry(key.clone()).or_insert(0);
            *count = count.saturating_add(1);
            *count
        };
        let jitter = rand::rng().random_range(0.8..1.2);
        delay(self.base, self.cap, failures)
            .mul_f64(jitter)
            .min(self.cap)
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn reset(&self, key: &ObjectRef<K>) {
        let mut map = self
            .failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.remove(key);
    }
}

/// `base * 2^(failures-1)`, capped.
pub fn delay(base: Duration, cap: Duration, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    base.saturating_mul(1 << exponent).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_the_base_up_to_the_cap() {
        let (base, cap) = (Duration::from_secs(2), Duration::from_secs(300));
        let delays: Vec<u64> = (1..=10).map(|n| delay(base, cap, n).as_secs()).collect();
        assert_eq!(delays, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(delay(base, cap, u32::MAX), cap);
    }

    #[test]
    fn counts_per_object_and_resets_on_success() {
        let backoff = ErrorBackoff::<crate::crd::PostgreSQL>::new(
            Duration::from_secs(10),
            Duration::from_secs(1000),
        );
        let a = ObjectRef::new("a").within("ns");
        let b = ObjectRef::new("b").within("ns");
        let first = backoff.next_delay(&a);
        let second = backoff.next_delay(&a);
        assert!((8..=12).contains(&first.as_secs()), "{first:?}");
        assert!((16..=24).contains(&second.as_secs()), "{second:?}");
        assert!(
            backoff.next_delay(&b).as_secs() <= 12,
            "other objects start fresh"
        );
        backoff.reset(&a);
        assert!(backoff.next_delay(&a).as_secs() <= 12);
    }
}
