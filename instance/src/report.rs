//! What the manager reports about its instance: the role it runs in, what the local server
//! says about itself, and whether it is ready. `http` serves it; docs/src/design/replication.md is the
//! `/status` contract.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use tusk_contract::{InstanceStatus, Lsns, PostgresState, Role};

use crate::monitor::{Observation, ServerFacts};

/// What the supervisor publishes after every step.
#[derive(Debug, Clone, Default)]
pub struct ManagerState {
    /// The supervisor's own account (initializing, fenced, stopped, lost); for a running
    /// postmaster the server's own answer (in recovery or not) overrides it.
    pub role: Role,
    pub postgres_running: bool,
    /// The running postmaster's start counter: facts count only for it.
    pub generation: Option<u64>,
    pub lease_holder: Option<String>,
    /// When the Lease was last read (or renewed) successfully.
    pub lease_read_at: Option<Instant>,
    /// How recent that read must be for this instance to serve.
    pub renew_deadline: Duration,
    pub fenced: bool,
    /// Since when a replica's WAL receiver has not been streaming (`None`: it streams).
    pub not_streaming_since: Option<Instant>,
    /// Why the last restore attempt failed, until one succeeds.
    pub restore_error: Option<String>,
    /// The declared roles and databases as the last pass on this primary left them.
    pub declared: Vec<tusk_contract::declared::ObjectState>,
    /// The digest of the declaration `declared` is of.
    pub declared_digest: Option<String>,
}

pub type SharedState = Arc<Mutex<ManagerState>>;

/// The `/status` body: the contract's type, shared with the operator.
pub type StatusReport = InstanceStatus;

/// How long a replica may go without streaming before it stops being ready (and the manager
/// repairs it): long enough for a failover and a repoint, short enough that `-ro` does not serve
/// stale reads for long.
pub const STREAMING_GRACE: Duration = Duration::from_secs(30);

/// The report of an instance whose manager is in `state`, from the latest `observation`.
pub fn report(pod: &str, state: &ManagerState, observation: &Observation) -> StatusReport {
    let facts = observation.fresh(state.generation);
    build_report(pod, state, facts)
}

fn build_report(pod: &str, state: &ManagerState, facts: Option<&ServerFacts>) -> StatusReport {
    // The role of a running server is what the server says, not what the manager asked for.
    let role = match facts {
        Some(f) if state.postgres_running && !state.fenced => {
            if f.in_recovery {
                Role::Replica
            } else {
                Role::Primary
            }
        }
        _ => state.role,
    };
    // Ready: serving in the role the Lease gives, as last read within the renew deadline, so a
    // standby about to be promoted is not (yet) ready, nor a primary that lost the Lease, nor an
    // instance that cannot read the Lease (it may have been handed it), nor a replica that has
    // not streamed for a while.
    let holder = state.lease_holder.as_deref() == Some(pod);
    let lease_fresh = state
        .lease_read_at
        .is_some_and(|at| at.elapsed() < state.renew_deadline);
    let streams = state
        .not_streaming_since
        .is_none_or(|since| since.elapsed() < STREAMING_GRACE);
    let ready = lease_fresh
        && match (facts, role) {
            (Some(f), Role::Primary) => !f.in_recovery && holder,
            (Some(f), Role::Replica) => f.in_recovery && !holder && streams,
            _ => false,
        };
    let in_recovery = facts.map(|f| f.in_recovery);
    let facts = facts.cloned().unwrap_or_default();
    StatusReport {
        pod: pod.to_string(),
        role,
        postgres: if state.postgres_running {
            PostgresState::Running
        } else {
            PostgresState::Stopped
        },
        ready,
        lease_holder: state.lease_holder.clone(),
        timeline: facts.timeline.and_then(|t| u32::try_from(t).ok()),
        system_identifier: facts.system_identifier,
        in_recovery,
        lsn: facts.lsn,
        wal_receiver: facts.wal_receiver,
        fenced: state.fenced,
        hot_standby_settings: facts.settings,
        restore_error: state.restore_error.clone(),
        archive: None,
        declared: state.declared.clone(),
        declared_digest: state.declared_digest.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manager that read the Lease (held by `holder`) just now.
    fn state(role: Role, holder: Option<&str>) -> ManagerState {
        ManagerState {
            role,
            postgres_running: true,
            generation: Some(1),
            lease_holder: holder.map(str::to_string),
            lease_read_at: Some(Instant::now()),
            renew_deadline: Duration::from_secs(4),
            ..ManagerState::default()
        }
    }

    fn in_recovery(yes: bool) -> ServerFacts {
        ServerFacts {
            in_recovery: yes,
            ..ServerFacts::default()
        }
    }

    #[test]
    fn status_json_has_the_contract_shape() {
        let state = state(Role::Replica, Some("demo-0"));
        let facts = ServerFacts {
            in_recovery: true,
            timeline: Some(2),
            system_identifier: Some("7401".into()),
            lsn: Lsns {
                current: None,
                received: Some("0/3000060".into()),
                replayed: Some("0/3000060".into()),
            },
            wal_receiver: Some("streaming".into()),
            settings: [
                ("max_connections", 200),
                ("max_locks_per_transaction", 64),
                ("max_prepared_transactions", 0),
                ("max_wal_senders", 10),
                ("max_worker_processes", 8),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
            lowered: Vec::new(),
        };
        let json = serde_json::to_value(build_report("demo-1", &state, Some(&facts))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"pod": "demo-1", "role": "replica", "postgres": "running",
                "ready": true, "leaseHolder": "demo-0", "timeline": 2,
                "systemIdentifier": "7401", "inRecovery": true,
                "lsn": {"current": null, "received": "0/3000060", "replayed": "0/3000060"},
                "walReceiver": "streaming", "fenced": false,
                "hotStandbySettings": {"max_connections": 200, "max_locks_per_transaction": 64,
                    "max_prepared_transactions": 0, "max_wal_senders": 10,
                    "max_worker_processes": 8}})
        );
        // The same body the operator's side decodes (tests/contracts/instance.json).
        let contract: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/contracts/instance.json")).unwrap();
        assert_eq!(json, contract["status"]["replica"]);
    }

    #[test]
    fn ready_only_in_the_role_the_lease_gives() {
        // Asked to promote (the holder), but the server is still in recovery: not ready.
        let promoting = state(Role::Primary, Some("demo-0"));
        assert!(!build_report("demo-0", &promoting, Some(&in_recovery(true))).ready);
        // Writable but not the holder: not ready.
        let other = state(Role::Primary, Some("demo-1"));
        assert!(!build_report("demo-0", &other, Some(&in_recovery(false))).ready);
        assert!(build_report("demo-0", &promoting, Some(&in_recovery(false))).ready);
        let fenced = ManagerState {
            role: Role::Fenced,
            fenced: true,
            ..ManagerState::default()
        };
        let report = build_report("demo-0", &fenced, None);
        assert_eq!(
            (report.postgres, report.ready),
            (PostgresState::Stopped, false)
        );
    }

    #[test]
    fn the_role_is_what_the_server_says_not_what_the_manager_asked_for() {
        // The manager started a standby; the server left recovery (a promotion it did not ask
        // for, or one still pending when it gave up waiting): it reports primary, not replica.
        let standby = state(Role::Replica, Some("demo-0"));
        let report = build_report("demo-1", &standby, Some(&in_recovery(false)));
        assert_eq!(
            (report.role, report.in_recovery),
            (Role::Primary, Some(false))
        );
        assert!(!report.ready, "a primary that does not hold the Lease");
    }

    #[test]
    fn an_instance_that_cannot_read_the_lease_is_not_ready() {
        let mut stale = state(Role::Replica, Some("demo-0"));
        stale.lease_read_at = Instant::now().checked_sub(Duration::from_secs(5));
        assert!(!build_report("demo-1", &stale, Some(&in_recovery(true))).ready);
        stale.lease_read_at = None;
        assert!(!build_report("demo-1", &stale, Some(&in_recovery(true))).ready);
    }

    #[test]
    fn a_replica_that_has_not_streamed_for_a_while_is_not_ready() {
        let mut replica = state(Role::Replica, Some("demo-0"));
        replica.not_streaming_since = Instant::now().checked_sub(Duration::from_secs(5));
        assert!(
            build_report("demo-1", &replica, Some(&in_recovery(true))).ready,
            "a blip"
        );
        replica.not_streaming_since = Instant::now().checked_sub(STREAMING_GRACE);
        assert!(!build_report("demo-1", &replica, Some(&in_recovery(true))).ready);
    }
}
