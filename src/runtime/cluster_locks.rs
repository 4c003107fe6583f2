//! One turn at a time per cluster across the operator's two queues: the reconcile and the
//! primary lane (`clusters::primary_lane`) both run the primary step, which decides a failover,
//! a switchover's next move and a rolling restart from what it reads; two of them at once on one
//! cluster could restart two pods or hand a Lease over twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as TurnLock, OwnedMutexGuard};

/// Per-cluster locks, created on first use and forgotten once nobody holds or waits for them.
#[derive(Default)]
pub struct ClusterLocks {
    locks: Mutex<HashMap<String, Weak<TurnLock<()>>>>,
}

/// A cluster's turn: the other queue waits until it is dropped.
pub type Turn = OwnedMutexGuard<()>;

impl ClusterLocks {
    /// Waits for `key`'s turn.
    pub async fn turn(&self, key: &str) -> Turn {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            // Forget the locks nobody holds (bounded by the clusters being reconciled now).
            if locks.len() > 64 {
                locks.retain(|_, lock| lock.strong_count() > 0);
            }
            match locks.get(key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    let lock = Arc::new(TurnLock::new(()));
                    locks.insert(key.to_owned(), Arc::downgrade(&lock));
                    lock
                }
            }
        };
        lock.lock_owned().await
    }

    /// How many clusters have a lock remembered (for tests).
    pub fn remembered(&self) -> usize {
        let locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.values().filter(|l| l.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_cluster_waits_for_its_own_turn_not_another_clusters() {
        let locks = Arc::new(ClusterLocks::default());
        let held = locks.turn("prod/a").await;
        // Another cluster goes at once.
        let other = tokio::time::timeout(Duration::from_millis(100), locks.turn("prod/b")).await;
        assert!(other.is_ok());
        // The same cluster waits until the turn is given back.
        let waiting = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.turn("prod/a").await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(held);
        let again = tokio::time::timeout(Duration::from_secs(1), waiting).await;
        assert!(matches!(again, Ok(Ok(_))));
    }

    #[tokio::test]
    async fn a_lock_nobody_holds_is_forgotten() {
        let locks = ClusterLocks::default();
        for n in 0..100 {
            drop(locks.turn(&format!("prod/c{n}")).await);
        }
        assert_eq!(locks.remembered(), 0);
    }
}
