//! The runtime both controllers share, knowing neither of them: the context and its watch
//! caches, server-side apply, error backoff, conditions, Events, status writes, Job states,
//! the operator's access to backup buckets, and how a reconcile settles.

pub mod apply;
pub mod backoff;
pub mod buckets;
pub mod by_cluster;
pub mod cluster_locks;
pub mod compact;
pub mod conditions;
pub mod context;
pub mod database_pods;
pub mod events;
pub mod instance_reader;
pub mod instances;
pub mod jobs;
pub mod lease_follows;
pub mod own_status;
pub mod packed;
pub mod secret_facts;
pub mod settle;
pub mod statefulset_summary;
pub mod status;
pub mod summaries;
pub mod watch;

pub use context::{Caches, Context, cached};
