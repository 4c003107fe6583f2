//! Leader election on a Lease, so that two operator replicas never reconcile at once.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Name of the Lease the replicas compete for.
pub const LEASE_NAME: &str = "tusk-operator";

/// Why leadership could not be acquired.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("setting up the Lease failed: {0}")]
    Lease(#[from] LeaseManagerError),
    #[error("the Lease manager stopped before this replica became the leader")]
    Stopped,
}

/// Leadership held through a Lease in `namespace`.
pub struct Leadership {
    channel: watch::Receiver<bool>,
    task: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
}

impl Leadership {
    /// Waits until this replica holds the Lease.
    pub async fn acquire(
        client: Client,
        namespace: &str,
        identity: &str,
    ) -> Result<Self, LeaderError> {
        let manager = LeaseManagerBuilder::new(client, LEASE_NAME)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(15)
            .with_grace(5)
            .build()
            .await?;
        let (mut channel, task) = manager.watch().await;
        while !*channel.borrow_and_update() {
            if channel.changed().await.is_err() {
                return Err(LeaderError::Stopped);
            }
        }
        Ok(Self { channel, task })
    }

    /// Resolves when the Lease is lost (or its manager stopped).
    pub async fn lost(&mut self) {
        loop {
            if !*self.channel.borrow_and_update() || self.channel.changed().await.is_err() {
                return;
            }
        }
    }

    /// Gives the Lease up, so that another replica takes over at once instead of waiting for
    /// it to expire.
    pub async fn release(self) {
        // Closing the channel tells the manager's task to release the Lease and finish.
        drop(self.channel);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}
