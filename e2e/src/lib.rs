//! The end-to-end harness of Tusk: typed clients against whatever cluster `KUBECONFIG` names,
//! a fresh namespace per scenario ([`with_temp_ns`]), condition waits with deadlines, and the
//! platform hooks (operator process, pod readiness, audit log, SQL, bucket) of the environment
//! the suite runs on. The scenarios live in `e2e/tests/`; `e2e/local/run.sh` runs them.

pub mod apply;
pub mod audit;
pub mod backups;
pub mod bucket;
pub mod capture;
pub mod cluster;
pub mod context;
pub mod diagnostics;
pub mod failure;
pub mod faults;
pub mod gcs;
pub mod invariants;
pub mod kubectl;
pub mod login;
pub mod manifests;
pub mod metrics;
pub mod objects;
pub mod pgbench;
pub mod platform;
pub mod plugin;
pub mod pods;
pub mod prometheus;
pub mod replication;
pub mod samples;
pub mod scale;
pub mod settings;
pub mod sql;
pub mod summary;
pub mod switchover;
pub mod testbin;
pub mod upgrades;
pub mod verification;
pub mod wait;

pub use context::{Ctx, say, with_temp_ns};
pub use failure::{Context, Failure, Level, Result, absent};
pub use objects::{Kind, Obj};
pub use tusk_e2e_macros::scenario;
pub use wait::{Check, until, until_none};
