//! The bucket a command names on its command line (`--store`, `--bucket`, `--path`, …), opened.

use backup_store::ClusterLocation;
use backup_store::settings::OpenError;
use backup_store::store::ObjectStore;

use backup_agent::error::AgentError;

use crate::cli::StoreArgs;

/// Opens the store and the cluster's location in it.
pub async fn open_store(
    args: &StoreArgs,
) -> Result<(Box<dyn ObjectStore>, ClusterLocation), AgentError> {
    args.flags
        .open(&args.namespace, &args.cluster)
        .await
        .map_err(|e| match e {
            OpenError::Usage(message) => AgentError::Usage(message),
            OpenError::Layout(e) => AgentError::Layout(e),
            OpenError::Store(e) => AgentError::Store(e),
        })
}
