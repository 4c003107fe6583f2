//! Switchover, decided: a pure function of the request (the PostgreSQL resource's
//! `tusk.dev/switchover-to` annotation), the primary Lease's switchover annotations and the
//! target's report. The I/O is in `switchover`; docs/src/design/replication.md has the protocol:
//! the operator asks the holder on the Lease, the holder checkpoints, shuts down fast and
//! releases the Lease naming its final LSN, and the operator hands the Lease to the target
//! only once the target has replayed past that LSN — so no acknowledged commit is lost, with
//! asynchronous replication too.

use std::time::Duration;

use super::election::{InstanceStatus, Lsn};
#[cfg(test)]
use super::election::{PostgresState, Role};

/// How long each half of a switchover may take before it is abandoned: the holder releasing
/// the Lease, then the target replaying the final WAL.
pub const SWITCHOVER_TIMEOUT: Duration = Duration::from_secs(30);

/// The switchover as the primary Lease records it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseSwitchover {
    /// `holderIdentity`; `None` once the old primary released it.
    pub holder: Option<String>,
    /// `tusk.dev/switchover-to`: the member the holder was asked to hand over to.
    pub to: Option<String>,
    /// `tusk.dev/switchover-from`: the holder when the switchover started.
    pub from: Option<String>,
    /// `tusk.dev/final-lsn`: written by the old primary with its release.
    pub final_lsn: Option<String>,
    /// Time since `tusk.dev/switchover-started` (the operator's clock).
    pub elapsed: Duration,
}

/// The next step of a switchover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchoverStep {
    /// Nothing requested, nothing in progress.
    Idle,
    /// The request is fulfilled (the target holds the Lease): clear it.
    Done,
    /// The request cannot be carried out: clear it and say why.
    Reject(String),
    /// Ask the holder, on the Lease, to hand over to `target`.
    Start { target: String },
    /// In progress: look again soon.
    Wait,
    /// The target has everything the old primary wrote: make it the holder.
    HandOver { target: String },
    /// Abandon the switchover: clear its annotations and hand the Lease back to `give_back`
    /// (the old primary, when it already released it), saying why.
    Abort {
        give_back: Option<String>,
        why: String,
    },
}

/// Decides the next step. `members`: the cluster's pod names; `target`: the target's report,
/// when it answered.
pub fn plan(
    request: Option<&str>,
    lease: &LeaseSwitchover,
    members: &[String],
    target: Option<&InstanceStatus>,
) -> SwitchoverStep {
    let Some(to) = lease.to.as_deref() else {
        return start(request, lease.holder.as_deref(), members, target);
    };
    match lease.holder.as_deref() {
        // Handed over in an earlier reconcile whose clean-up did not happen.
        Some(holder) if holder == to => SwitchoverStep::Done,
        Some(holder) if lease.elapsed > SWITCHOVER_TIMEOUT => SwitchoverStep::Abort {
            give_back: None,
            why: format!(
                "{holder} did not shut down and release the Lease within {}s",
                SWITCHOVER_TIMEOUT.as_secs()
            ),
        },
        Some(_) => SwitchoverStep::Wait,
        None => {
            let final_lsn = lease.final_lsn.as_deref().and_then(Lsn::parse);
            let replayed = target
                .and_then(|r| r.lsn.replayed.as_deref())
                .and_then(Lsn::parse);
            match (final_lsn, replayed) {
                // Past the final checkpoint record's start: the position a standby reports is
                // the end of the last record it replayed, so it replayed the whole record.
                (Some(last), Some(replayed)) if replayed > last => SwitchoverStep::HandOver {
                    target: to.to_owned(),
                },
                _ if lease.elapsed > SWITCHOVER_TIMEOUT => SwitchoverStep::Abort {
                    give_back: lease.from.clone(),
                    why: format!(
                        "{to} did not replay the old primary's final WAL ({}) within {}s",
                        lease.final_lsn.as_deref().unwrap_or("unknown"),
                        SWITCHOVER_TIMEOUT.as_secs()
                    ),
                },
                _ => SwitchoverStep::Wait,
            }
        }
    }
}

/// No switchover in progress: start the requested one if the target can take over.
fn start(
    request: Option<&str>,
    holder: Option<&str>,
    members: &[String],
    target: Option<&InstanceStatus>,
) -> SwitchoverStep {
    let Some(requested) = request else {
        return SwitchoverStep::Idle;
    };
    if holder == Some(requested) {
        return SwitchoverStep::Done;
    }
    if !members.iter().any(|m| m == requested) {
        return SwitchoverStep::Reject(format!(
            "{requested} is not an instance of this cluster (instances: {})",
            members.join(", ")
        ));
    }
    let Some(holder) = holder else {
        return SwitchoverStep::Reject(
            "no instance holds the primary Lease (a failover is under way)".to_owned(),
        );
    };
    let streaming = target
        .is_some_and(|r| r.is_running_replica() && r.wal_receiver.as_deref() == Some("streaming"));
    if !streaming {
        let seen = target.map_or("no answer from its instance manager".to_owned(), |r| {
            format!(
                "role {}, postgres {}, WAL receiver {}",
                r.role,
                r.postgres,
                r.wal_receiver.as_deref().unwrap_or("none")
            )
        });
        return SwitchoverStep::Reject(format!(
            "{requested} is not a replica streaming from {holder} ({seen})"
        ));
    }
    SwitchoverStep::Start {
        target: requested.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clusters::ha::election::Lsns;

    fn members() -> Vec<String> {
        ["demo-0", "demo-1", "demo-2"].map(String::from).to_vec()
    }

    fn replica(replayed: &str, receiver: &str) -> InstanceStatus {
        InstanceStatus {
            pod: "demo-1".into(),
            role: Role::Replica,
            postgres: PostgresState::Running,
            timeline: Some(1),
            lsn: Lsns {
                current: None,
                received: Some(replayed.into()),
                replayed: Some(replayed.into()),
            },
            wal_receiver: Some(receiver.into()),
            ..InstanceStatus::default()
        }
    }

    fn held_by(holder: &str) -> LeaseSwitchover {
        LeaseSwitchover {
            holder: Some(holder.into()),
            ..LeaseSwitchover::default()
        }
    }

    /// demo-0 asked to hand over to demo-1, `elapsed` ago; `released` with final LSN 0/5000028.
    fn asked(released: bool, elapsed: u64) -> LeaseSwitchover {
        LeaseSwitchover {
            holder: (!released).then(|| "demo-0".into()),
            to: Some("demo-1".into()),
            from: Some("demo-0".into()),
            final_lsn: released.then(|| "0/5000028".into()),
            elapsed: Duration::from_secs(elapsed),
        }
    }

    #[test]
    fn a_request_starts_only_toward_a_streaming_replica_of_this_cluster() {
        let streaming = replica("0/5000000", "streaming");
        let lease = held_by("demo-0");
        let plan_for = |request, report| plan(Some(request), &lease, &members(), report);
        assert_eq!(
            plan_for("demo-1", Some(&streaming)),
            SwitchoverStep::Start {
                target: "demo-1".into()
            }
        );
        assert_eq!(plan(None, &lease, &members(), None), SwitchoverStep::Idle);
        assert_eq!(plan_for("demo-0", None), SwitchoverStep::Done);
        let SwitchoverStep::Reject(why) = plan_for("demo-7", Some(&streaming)) else {
            panic!("a stranger accepted");
        };
        assert!(why.contains("not an instance"), "{why}");
        let stopped = replica("0/5000000", "stopped");
        let SwitchoverStep::Reject(why) = plan_for("demo-1", Some(&stopped)) else {
            panic!("a replica that does not stream accepted");
        };
        assert!(why.contains("WAL receiver stopped"), "{why}");
        assert!(matches!(
            plan_for("demo-1", None),
            SwitchoverStep::Reject(_)
        ));
        let released = LeaseSwitchover::default();
        let released_plan = plan(Some("demo-1"), &released, &members(), Some(&streaming));
        assert!(matches!(released_plan, SwitchoverStep::Reject(_)));
    }

    #[test]
    fn the_target_is_promoted_only_after_it_replayed_past_the_final_lsn() {
        let ahead = replica("0/5000100", "streaming");
        let at = replica("0/5000028", "streaming");
        let members = members();
        let step = |lease: &LeaseSwitchover, report| plan(None, lease, &members, report);
        // Not released yet: wait for the old primary, whatever the target says.
        assert_eq!(step(&asked(false, 1), Some(&ahead)), SwitchoverStep::Wait);
        // Released: the target must be strictly past the final checkpoint's start.
        assert_eq!(step(&asked(true, 1), Some(&at)), SwitchoverStep::Wait);
        assert_eq!(step(&asked(true, 1), None), SwitchoverStep::Wait);
        assert_eq!(
            step(&asked(true, 1), Some(&ahead)),
            SwitchoverStep::HandOver {
                target: "demo-1".into()
            }
        );
    }

    #[test]
    fn a_stalled_switchover_is_abandoned_and_the_old_primary_keeps_its_role() {
        let members = members();
        let at = replica("0/5000028", "streaming");
        let SwitchoverStep::Abort { give_back, why } =
            plan(None, &asked(false, 31), &members, Some(&at))
        else {
            panic!("a holder that never released is waited for forever");
        };
        assert_eq!(give_back, None);
        assert!(why.contains("did not shut down"), "{why}");
        let SwitchoverStep::Abort { give_back, why } =
            plan(None, &asked(true, 31), &members, Some(&at))
        else {
            panic!("a target that never caught up is waited for forever");
        };
        assert_eq!(give_back.as_deref(), Some("demo-0"));
        assert!(why.contains("0/5000028"), "{why}");
        let mut done = asked(true, 31);
        done.holder = Some("demo-1".into());
        assert_eq!(plan(None, &done, &members, None), SwitchoverStep::Done);
    }
}
