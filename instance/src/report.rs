//! What the manager reports about its instance: the role it runs in, what the local server
//! says about itself, and whether it is ready. `http` serves it; docs/replication.md is the
//! `/status` contract.

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use tusk_contract::{InstanceStatus, Lsns, PostgresState, Role};

use crate::context::Context;
use crate::error::Error;

/// What the supervisor publishes after every step.
#[derive(Debug, Clone, Default)]
pub struct ManagerState {
    pub role: Role,
    pub postgres_running: bool,
    pub lease_holder: Option<String>,
    pub fenced: bool,
}

pub type SharedState = Arc<Mutex<ManagerState>>;

/// The `/status` body: the contract's type, shared with the operator.
pub type StatusReport = InstanceStatus;

/// What the local server says about itself.
#[derive(Debug, Default)]
struct ServerFacts {
    in_recovery: bool,
    timeline: Option<i64>,
    system_identifier: Option<String>,
    lsn: Lsns,
    wal_receiver: Option<String>,
}

// The timeline: a primary's from its current WAL file name (the last checkpoint may predate a
// promotion), a standby's from its WAL receiver, else from the last checkpoint.
const FACTS: &str = "SELECT pg_is_in_recovery(), \
    (SELECT system_identifier::text FROM pg_control_system()), \
    CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END, \
    pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text, \
    (SELECT status FROM pg_stat_wal_receiver), \
    CASE WHEN pg_is_in_recovery() \
      THEN COALESCE((SELECT received_tli FROM pg_stat_wal_receiver), \
                    (SELECT timeline_id FROM pg_control_checkpoint()))::int8 \
      ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END";

async fn server_facts(ctx: &Context) -> Result<ServerFacts, Error> {
    let client = crate::sql::connect(ctx, "postgres").await?;
    let row = client
        .query_one(FACTS, &[])
        .await
        .map_err(Error::sql("reading the server's status"))?;
    Ok(ServerFacts {
        in_recovery: row.get(0),
        system_identifier: row.get(1),
        lsn: Lsns {
            current: row.get(2),
            received: row.get(3),
            replayed: row.get(4),
        },
        wal_receiver: row.get(5),
        timeline: row.get(6),
    })
}

pub async fn report(ctx: &Context, state: &ManagerState) -> StatusReport {
    let facts = if state.postgres_running {
        match tokio::time::timeout(Duration::from_secs(3), server_facts(ctx)).await {
            Ok(Ok(facts)) => Some(facts),
            _ => None,
        }
    } else {
        None
    };
    build_report(ctx.me(), state, facts)
}

fn build_report(pod: &str, state: &ManagerState, facts: Option<ServerFacts>) -> StatusReport {
    // Ready: serving in the role the Lease gives, so a standby about to be promoted is not
    // (yet) ready, and neither is a primary that lost the Lease.
    let holder = state.lease_holder.as_deref() == Some(pod);
    let ready = match (&facts, state.role) {
        (Some(f), Role::Primary) => !f.in_recovery && holder,
        (Some(f), Role::Replica) => f.in_recovery && !holder,
        _ => false,
    };
    let in_recovery = facts.as_ref().map(|f| f.in_recovery);
    let facts = facts.unwrap_or_default();
    StatusReport {
        pod: pod.to_string(),
        role: state.role,
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_has_the_contract_shape() {
        let state = ManagerState {
            role: Role::Replica,
            postgres_running: true,
            lease_holder: Some("demo-0".into()),
            fenced: false,
        };
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
        };
        let json = serde_json::to_value(build_report("demo-1", &state, Some(facts))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"pod": "demo-1", "role": "replica", "postgres": "running",
                "ready": true, "leaseHolder": "demo-0", "timeline": 2,
                "systemIdentifier": "7401",
                "lsn": {"current": null, "received": "0/3000060", "replayed": "0/3000060"},
                "walReceiver": "streaming", "fenced": false})
        );
        // The same body the operator's side decodes (tests/contracts/instance.json).
        let contract: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/contracts/instance.json")).unwrap();
        assert_eq!(json, contract["status"]["replica"]);
    }

    #[test]
    fn ready_only_in_the_role_the_lease_gives() {
        let state = ManagerState {
            role: Role::Primary,
            postgres_running: true,
            ..Default::default()
        };
        let facts = ServerFacts {
            in_recovery: true,
            ..Default::default()
        };
        assert!(!build_report("demo-0", &state, Some(facts)).ready);
        let writable = || ServerFacts::default();
        assert!(!build_report("demo-0", &state, Some(writable())).ready);
        let holder = ManagerState {
            lease_holder: Some("demo-0".into()),
            ..state.clone()
        };
        assert!(build_report("demo-0", &holder, Some(writable())).ready);
        let fenced = ManagerState {
            role: Role::Fenced,
            fenced: true,
            ..Default::default()
        };
        let report = build_report("demo-0", &fenced, None);
        assert_eq!(
            (report.postgres, report.ready),
            (PostgresState::Stopped, false)
        );
    }
}
