//! `tusk-instance`: PID 1 of a Tusk database pod. It obeys the primary Lease: initdb or clone,
//! run as primary or standby, promote, fence, rewind, and report on HTTP. The contract is
//! docs/src/design/replication.md.

pub mod archive_gap;
pub mod archive_socket;
pub mod archiver;
pub mod auto_conf;
pub mod checkpoint;
pub mod config;
pub mod context;
pub mod continuity;
pub mod continuity_checks;
pub mod data_lock;
pub mod decide;
pub mod declared_passwords;
pub mod demote;
pub mod disk_policy;
pub mod error;
pub mod events;
pub mod http;
pub mod install;
pub mod machine_roles;
pub mod metrics;
pub mod monitor;
pub mod pgdata;
pub mod planned_restart;
pub mod postmaster;
pub mod preferred_sync;
pub mod promote;
pub mod reaper;
pub mod report;
pub mod restore;
pub mod restore_fetch;
pub mod restore_prefetch;
pub mod rewind;
pub mod role_source;
pub mod roles;
pub mod slots;
pub mod sql;
pub mod status_accept;
pub mod status_auth;
pub mod status_tls;
pub mod streaming_clock;
pub mod supervisor;
pub mod tls_reload;
pub mod wal_push;
pub mod watchdog;
