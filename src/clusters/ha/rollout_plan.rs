//! Which pod to restart next, decided: a pure function of the database pods, which of them
//! run the StatefulSet's current revision, and the primary. A replicated cluster's StatefulSet
//! uses `OnDelete`, so nothing restarts until this says so: replicas first, one at a time, each
//! only once every instance is ready again; then a switchover to an updated replica, after
//! which the old primary is an outdated replica like the others. The same switchover moves the
//! primary off an ordinal that lowering `instances` removes. A change that lowers a
//! hot-standby setting (`max_connections` and four others) waits until the primary has
//! restarted in place with the lower values: a replica restarted first would refuse to run
//! below its primary and never become ready.

/// A database pod as the plan sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub pod: String,
    pub ordinal: i32,
    pub ready: bool,
    /// Runs the StatefulSet's update revision.
    pub updated: bool,
}

/// The next move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Move {
    /// Nothing to restart or move.
    Idle,
    /// An instance is not ready (a restart under way): nothing else restarts until it is.
    Wait,
    /// Delete this replica's pod: the StatefulSet recreates it at the update revision.
    Restart { pod: String },
    /// The update lowers these hot-standby settings: the primary's manager restarts it in
    /// place with them first (once its volume shows the new ConfigMap); nothing else restarts.
    PrimaryFirst { lowered: Vec<String> },
    /// The primary must move first (it is outdated, or on a removed ordinal): switch over to
    /// one of `candidates`, ready replicas that may take it.
    Switchover {
        candidates: Vec<String>,
        why: String,
    },
}

/// Decides the next move. `rolling`: the cluster restarts its own pods (replicated, `OnDelete`);
/// `lowered`: the hot-standby settings the update sets below what the primary runs.
pub fn next_move(
    members: &[Member],
    primary: &str,
    instances: i32,
    rolling: bool,
    lowered: &[String],
) -> Move {
    let Some(holder) = members.iter().find(|m| m.pod == primary) else {
        return Move::Idle;
    };
    let replicas = || members.iter().filter(|m| m.pod != primary);
    if holder.ordinal >= instances {
        // A primary that does not serve cannot hand over cleanly: that is a failover's
        // business (a switchover would hold the failover off until it timed out).
        if !holder.ready {
            return Move::Wait;
        }
        return Move::Switchover {
            candidates: replicas()
                .filter(|m| m.ready && m.ordinal < instances)
                .map(|m| m.pod.clone())
                .collect(),
            why: format!("scale-down: ordinal {} is removed", holder.ordinal),
        };
    }
    if !rolling {
        return Move::Idle;
    }
    // A pod deleted and not yet recreated is no member at all, for a moment in the cache: as
    // down as a restarting one. Counted as ready instead, it let the next replica go while the
    // first was still gone (two replicas down at once on real pods).
    if (0..instances).any(|ordinal| !members.iter().any(|m| m.ordinal == ordinal)) {
        return Move::Wait;
    }
    let highest = |pick: &dyn Fn(&Member) -> bool| {
        replicas()
            .filter(|m| pick(m))
            .max_by_key(|m| m.ordinal)
            .map(|m| Move::Restart { pod: m.pod.clone() })
    };
    // An outdated replica that does not serve anyway goes first: the new revision may be the
    // fix for whatever keeps it unready.
    if let Some(restart) = highest(&|m| !m.updated && !m.ready) {
        return restart;
    }
    if members.iter().any(|m| !m.ready) {
        return Move::Wait;
    }
    if !lowered.is_empty() && members.iter().any(|m| !m.updated) {
        return Move::PrimaryFirst {
            lowered: lowered.to_vec(),
        };
    }
    if let Some(restart) = highest(&|m| !m.updated) {
        return restart;
    }
    if !holder.updated {
        return Move::Switchover {
            candidates: replicas().map(|m| m.pod.clone()).collect(),
            why: "rolling update: the primary restarts last".to_owned(),
        };
    }
    Move::Idle
}

#[cfg(test)]
mod tests {
    use super::*;

    /// demo-0..demo-(n-1); `outdated`/`unready` list ordinals.
    fn members(n: i32, outdated: &[i32], unready: &[i32]) -> Vec<Member> {
        (0..n)
            .map(|ordinal| Member {
                pod: format!("demo-{ordinal}"),
                ordinal,
                ready: !unready.contains(&ordinal),
                updated: !outdated.contains(&ordinal),
            })
            .collect()
    }

    fn restart(pod: &str) -> Move {
        Move::Restart { pod: pod.into() }
    }

    #[test]
    fn a_replica_deleted_and_not_yet_recreated_holds_the_next_restart() {
        // demo-2 deleted by the previous move; its new pod is not in the cache yet.
        let gone: Vec<Member> = members(3, &[0, 1, 2], &[])
            .into_iter()
            .filter(|m| m.ordinal != 2)
            .collect();
        assert_eq!(next_move(&gone, "demo-0", 3, true, &[]), Move::Wait);
    }

    #[test]
    fn replicas_restart_first_one_at_a_time_highest_ordinal_first() {
        let all_outdated = members(3, &[0, 1, 2], &[]);
        assert_eq!(
            next_move(&all_outdated, "demo-0", 3, true, &[]),
            restart("demo-2")
        );
        // demo-2 restarting: wait for it.
        let restarting = members(3, &[0, 1], &[2]);
        assert_eq!(next_move(&restarting, "demo-0", 3, true, &[]), Move::Wait);
        let next = members(3, &[0, 1], &[]);
        assert_eq!(next_move(&next, "demo-0", 3, true, &[]), restart("demo-1"));
        // The primary on ordinal 1: the others go first.
        assert_eq!(
            next_move(&all_outdated, "demo-1", 3, true, &[]),
            restart("demo-2")
        );
    }

    #[test]
    fn a_lowered_hot_standby_setting_waits_for_the_primary_to_restart_first() {
        let lowered = vec!["max_connections".to_owned()];
        let all_outdated = members(3, &[0, 1, 2], &[]);
        assert_eq!(
            next_move(&all_outdated, "demo-0", 3, true, &lowered),
            Move::PrimaryFirst {
                lowered: lowered.clone()
            }
        );
        // The primary restarted in place with the lower values: replicas first, as always.
        assert_eq!(
            next_move(&all_outdated, "demo-0", 3, true, &[]),
            restart("demo-2")
        );
        // A restart under way is waited for first; an update already done lowers nothing.
        let restarting = members(3, &[0, 1, 2], &[0]);
        assert_eq!(
            next_move(&restarting, "demo-0", 3, true, &lowered),
            Move::Wait
        );
        assert_eq!(
            next_move(&members(3, &[], &[]), "demo-0", 3, true, &lowered),
            Move::Idle
        );
    }

    #[test]
    fn the_primary_restarts_last_after_a_switchover() {
        let only_primary = members(3, &[0], &[]);
        let Move::Switchover { candidates, why } = next_move(&only_primary, "demo-0", 3, true, &[])
        else {
            panic!("the outdated primary was not moved");
        };
        assert_eq!(candidates, ["demo-1", "demo-2"]);
        assert!(why.contains("rolling update"), "{why}");
        // After the switchover the old primary is an outdated replica.
        assert_eq!(
            next_move(&only_primary, "demo-1", 3, true, &[]),
            restart("demo-0")
        );
        assert_eq!(
            next_move(&members(3, &[], &[]), "demo-1", 3, true, &[]),
            Move::Idle
        );
    }

    #[test]
    fn an_unready_outdated_replica_restarts_even_while_others_wait() {
        let stuck = members(3, &[1, 2], &[1]);
        assert_eq!(next_move(&stuck, "demo-0", 3, true, &[]), restart("demo-1"));
        // Never the primary, even unready: that is a failover's business.
        let primary_down = members(3, &[0], &[0]);
        assert_eq!(next_move(&primary_down, "demo-0", 3, true, &[]), Move::Wait);
    }

    #[test]
    fn scale_down_moves_the_primary_to_a_kept_ordinal_first() {
        let three = members(3, &[], &[]);
        let Move::Switchover { candidates, why } = next_move(&three, "demo-2", 1, false, &[])
        else {
            panic!("the primary's ordinal was removed with it");
        };
        assert_eq!(candidates, ["demo-0"]);
        assert!(why.contains("ordinal 2"), "{why}");
        assert_eq!(next_move(&three, "demo-0", 1, false, &[]), Move::Idle);
        // A single instance restarts through the StatefulSet itself.
        assert_eq!(
            next_move(&members(1, &[0], &[]), "demo-0", 1, false, &[]),
            Move::Idle
        );
    }

    #[test]
    fn a_lost_primary_on_a_removed_ordinal_is_left_to_the_failover() {
        let primary_down = members(3, &[], &[2]);
        assert_eq!(next_move(&primary_down, "demo-2", 2, true, &[]), Move::Wait);
    }
}
