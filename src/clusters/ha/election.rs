//! Who should be primary: pure decisions over what the pods, the Lease and the instance
//! managers report. The I/O around them is in `primary`.

use std::cmp::Ordering;
use std::time::Duration;

pub use crate::runtime::instances::{InstanceStatus, Lsns, PostgresState, Role};

use crate::crd::Synchronous;

/// A write-ahead log position, `X/Y` in PostgreSQL's notation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lsn(pub u64);

impl Lsn {
    /// Parses `16/B374D848`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let (high, low) = text.split_once('/')?;
        let high = u64::from_str_radix(high, 16).ok()?;
        let low = u64::from_str_radix(low, 16).ok()?;
        (high <= u64::from(u32::MAX) && low <= u64::from(u32::MAX))
            .then_some(Self(high << 32 | low))
    }
}

/// How far a replica's WAL reaches: (timeline, received, replayed).
fn progress(report: &InstanceStatus) -> (u32, Lsn, Lsn) {
    let lsn = |text: &Option<String>| text.as_deref().and_then(Lsn::parse).unwrap_or_default();
    let replayed = lsn(&report.lsn.replayed);
    // A replica that has not streamed since its start reports no receive position; what it
    // replayed it has received.
    let received = lsn(&report.lsn.received).max(replayed);
    (report.timeline.unwrap_or(0), received, replayed)
}

/// A running standby that can be promoted: still in recovery, and ranked by positions it
/// reported (one that reports none cannot show it holds any acknowledged commit, so it neither
/// wins nor counts towards a quorum).
fn promotable(report: &InstanceStatus) -> bool {
    let known = |lsn: &Option<String>| lsn.as_deref().and_then(Lsn::parse).is_some();
    report.is_running_replica() && (known(&report.lsn.received) || known(&report.lsn.replayed))
}

/// The most advanced promotable replica, by timeline, then received WAL, then replayed WAL;
/// ties go to the lowest pod name, so two operators (or two reconciles) agree.
pub fn most_advanced<'a>(
    reports: &'a [InstanceStatus],
    holder: &str,
) -> Option<&'a InstanceStatus> {
    reports
        .iter()
        .filter(|report| report.pod != holder && promotable(report))
        .max_by(|a, b| match progress(a).cmp(&progress(b)) {
            Ordering::Equal => b.pod.cmp(&a.pod),
            other => other,
        })
}

/// The `ANY n` a failover must respect: only `required` durability promises that `n` replicas
/// hold every acknowledged commit. `preferred` may have acknowledged commits that no replica
/// confirmed (while degraded), so, like asynchronous replication, it promises nothing.
pub fn quorum(synchronous: Option<&Synchronous>) -> Option<usize> {
    let synchronous = synchronous.filter(|s| s.is_required())?;
    usize::try_from(synchronous.number).ok()
}

/// How many replicas must report before one may be promoted. With synchronous replication
/// (`ANY sync_number`) every acknowledged commit is on `sync_number` of the `standbys`; any
/// `standbys - sync_number + 1` of them include one of those, so the most advanced of that many
/// holds every acknowledged commit. Asynchronous replication promises nothing: one will do.
pub fn reports_needed(standbys: usize, sync_number: Option<usize>) -> usize {
    match sync_number {
        Some(n) if n >= 1 => standbys.saturating_sub(n) + 1,
        _ => 1,
    }
}

/// The replica to promote: the most advanced of the promotable `reports`, provided at least
/// `needed` replicas are promotable.
pub fn candidate<'a>(
    reports: &'a [InstanceStatus],
    holder: &str,
    needed: usize,
) -> Result<&'a InstanceStatus, usize> {
    let promotable = reports
        .iter()
        .filter(|report| report.pod != holder && promotable(report))
        .count();
    match most_advanced(reports, holder) {
        Some(best) if promotable >= needed => Ok(best),
        _ => Err(promotable),
    }
}

/// What to do about the primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The holder's pod serves: nothing to do.
    Healthy,
    /// The holder's pod does not serve but its manager still renews the Lease (a restart in
    /// place, a crash recovery): look again after `recheck`.
    Wait { recheck: Duration },
    /// The Lease has not been renewed for its whole duration: the holder has fenced itself, so
    /// the Lease can be handed to another instance.
    Expired,
}

/// Decides from the holder pod's readiness and how long the operator has seen the Lease
/// unchanged (on its own clock, so clock skew between nodes does not matter).
pub fn decide(holder_serves: bool, unchanged_for: Duration, lease_duration: Duration) -> Decision {
    if holder_serves {
        Decision::Healthy
    } else if unchanged_for >= lease_duration {
        Decision::Expired
    } else {
        // Look again when it would expire, but at least every second: a renewal seen sooner
        // means the holder is alive.
        let recheck = (lease_duration - unchanged_for).min(Duration::from_secs(1));
        Decision::Wait { recheck }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(pod: &str, timeline: u32, received: &str, replayed: &str) -> InstanceStatus {
        InstanceStatus {
            pod: pod.into(),
            role: Role::Replica,
            postgres: PostgresState::Running,
            timeline: Some(timeline),
            lsn: Lsns {
                current: None,
                received: Some(received.into()),
                replayed: Some(replayed.into()),
            },
            wal_receiver: Some("streaming".into()),
            ..InstanceStatus::default()
        }
    }

    #[test]
    fn a_report_as_the_contract_writes_it_is_a_promotable_replica() {
        let contract: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/contracts/instance.json"))
                .expect("tests/contracts/instance.json is JSON");
        let sample = contract["status"]["replica"].clone();
        let report: InstanceStatus = serde_json::from_value(sample).expect("the sample decodes");
        let reports = [report];
        let best = most_advanced(&reports, "demo-0").map(|r| r.pod.as_str());
        assert_eq!(best, Some("demo-1"));
        assert_eq!(
            progress(&reports[0]),
            (2, Lsn(0x0300_0060), Lsn(0x0300_0060))
        );
    }

    #[test]
    fn lsns_parse_as_postgres_writes_them() {
        assert_eq!(Lsn::parse("0/3000060"), Some(Lsn(0x0300_0060)));
        assert_eq!(Lsn::parse("16/B374D848"), Some(Lsn(0x16_B374_D848)));
        assert!(Lsn::parse("1/0") > Lsn::parse("0/FFFFFFFF"));
        for bad in ["", "0", "x/1", "1/", "100000000/0"] {
            assert_eq!(Lsn::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_newest_timeline_wins_then_the_most_received_wal() {
        let reports = [
            replica("demo-1", 1, "0/9000000", "0/9000000"),
            replica("demo-2", 2, "0/5000000", "0/5000000"),
            replica("demo-3", 2, "0/6000000", "0/5000000"),
        ];
        assert_eq!(most_advanced(&reports, "demo-0").unwrap().pod, "demo-3");
    }

    #[test]
    fn received_beats_replayed_and_ties_go_to_the_lowest_name() {
        let reports = [
            replica("demo-2", 1, "0/7000000", "0/7000000"),
            replica("demo-1", 1, "0/8000000", "0/6000000"),
        ];
        assert_eq!(most_advanced(&reports, "demo-0").unwrap().pod, "demo-1");
        let reports = [
            replica("demo-2", 1, "0/7000000", "0/7000000"),
            replica("demo-1", 1, "0/7000000", "0/7000000"),
        ];
        assert_eq!(most_advanced(&reports, "demo-0").unwrap().pod, "demo-1");
    }

    #[test]
    fn never_the_holder_a_primary_or_a_stopped_instance() {
        let mut stopped = replica("demo-1", 1, "0/9000000", "0/9000000");
        stopped.postgres = PostgresState::Stopped;
        let mut fenced = replica("demo-2", 1, "0/9000000", "0/9000000");
        fenced.role = Role::Fenced;
        let holder = replica("demo-0", 1, "0/9000000", "0/9000000");
        assert_eq!(most_advanced(&[stopped, fenced, holder], "demo-0"), None);
    }

    #[test]
    fn a_replica_without_positions_or_out_of_recovery_neither_wins_nor_counts() {
        let mut blind = replica("demo-2", 1, "0/9000000", "0/9000000");
        blind.lsn = Lsns::default();
        let mut promoted = replica("demo-3", 1, "0/9000000", "0/9000000");
        promoted.in_recovery = Some(false);
        let reports = [
            replica("demo-1", 1, "0/5000000", "0/5000000"),
            blind,
            promoted,
        ];
        assert_eq!(
            candidate(&reports, "demo-0", 2).map(|r| r.pod.as_str()),
            Err(1)
        );
        assert_eq!(
            candidate(&reports, "demo-0", 1).map(|r| r.pod.as_str()),
            Ok("demo-1")
        );
    }

    #[test]
    fn synchronous_quorums_need_enough_replicas_to_include_a_confirming_one() {
        // Two standbys, ANY 1: both must answer (the one that confirmed may be either).
        assert_eq!(reports_needed(2, Some(1)), 2);
        // Two standbys, ANY 2: both hold every commit, one answer suffices.
        assert_eq!(reports_needed(2, Some(2)), 1);
        assert_eq!(reports_needed(4, Some(2)), 3);
        assert_eq!(reports_needed(2, None), 1);
        let one = [replica("demo-1", 1, "0/9000000", "0/9000000")];
        assert_eq!(candidate(&one, "demo-0", 2).map(|r| r.pod.as_str()), Err(1));
        assert_eq!(
            candidate(&one, "demo-0", 1).map(|r| r.pod.as_str()),
            Ok("demo-1")
        );
    }

    #[test]
    fn only_required_durability_makes_a_failover_wait_for_a_quorum() {
        use crate::crd::Durability;
        let sync = |durability| Synchronous {
            number: 1,
            durability,
        };
        let required = quorum(Some(&sync(Durability::Required)));
        let preferred = quorum(Some(&sync(Durability::Preferred)));
        assert_eq!((required, preferred, quorum(None)), (Some(1), None, None));
        // Three standbys, ANY 1: required waits for all three, preferred takes the one answering.
        assert_eq!(reports_needed(3, required), 3);
        assert_eq!(reports_needed(3, preferred), 1);
        let one = [replica("demo-2", 1, "0/9000000", "0/9000000")];
        let needed = reports_needed(3, preferred);
        assert_eq!(
            candidate(&one, "demo-0", needed).map(|r| r.pod.as_str()),
            Ok("demo-2")
        );
    }

    #[test]
    fn a_lease_is_handed_on_only_after_its_full_duration_unrenewed() {
        let duration = Duration::from_secs(6);
        assert_eq!(
            decide(true, Duration::from_secs(60), duration),
            Decision::Healthy
        );
        assert_eq!(
            decide(false, Duration::from_millis(5_500), duration),
            Decision::Wait {
                recheck: Duration::from_millis(500)
            }
        );
        assert_eq!(
            decide(false, Duration::ZERO, duration),
            Decision::Wait {
                recheck: Duration::from_secs(1)
            }
        );
        assert_eq!(decide(false, duration, duration), Decision::Expired);
    }
}
