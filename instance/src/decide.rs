//! What the manager should do next, as a pure function of what it knows: the Lease as last
//! read, when it last renewed it, and the local PostgreSQL. Kept free of I/O so every rule of
//! docs/src/design/replication.md is unit-tested on plain values.

use std::time::{Duration, Instant};

/// The Lease as the manager last read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    /// `holderIdentity`; `None` when empty.
    pub holder: Option<String>,
    pub duration: Duration,
    /// The `tusk.dev/instances` annotation (empty when absent).
    pub instances: Vec<String>,
    /// The `tusk.dev/switchover-to` annotation: the operator asks the holder to hand over to
    /// this member (docs/src/design/replication.md, Switchover).
    pub switchover_to: Option<String>,
    /// The holder's pod IP, as the holder (or the operator handing it the Lease) published it
    /// in `tusk.dev/holder-address`; `None` when absent or written for another holder.
    pub holder_address: Option<String>,
    /// `tusk.dev/system-identifier`: the cluster has bootstrapped, with this database.
    pub system_identifier: Option<String>,
    /// `tusk.dev/release-requested`: the operator asks this holder to let the Lease expire.
    pub release_requested: Option<String>,
}

impl LeaseView {
    /// How long after its last successful renew a holder may still act as primary: two
    /// seconds less than the Lease duration, so the holder has fenced itself before the
    /// operator can hand the Lease to someone else.
    pub fn renew_deadline(&self) -> Duration {
        self.duration
            .saturating_sub(Duration::from_secs(2))
            .max(Duration::from_secs(1))
    }
}

/// Whom a standby streams from: the holder's pod name (its stable DNS name) and, when known,
/// its pod IP. The IP is dialled directly: a recreated primary comes back at a new IP while
/// the DNS name can still give the old one, whose connect then hangs in the kernel's retries.
/// A changed IP on the Lease repoints the standby at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub name: String,
    pub address: Option<String>,
}

impl Upstream {
    /// By name only: resolved through DNS.
    pub fn named(name: &str) -> Upstream {
        Upstream {
            name: name.to_string(),
            address: None,
        }
    }
}

/// The local PostgreSQL as the supervisor sees it (a running server's role as the server
/// itself says, not as the manager started it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Local {
    /// No data directory yet (or initdb's bootstrap did not finish).
    NoData,
    /// Data of another database system than the one the Lease records: never started.
    Foreign,
    /// Data but no postmaster; `standby`: `standby.signal` is present.
    Stopped { standby: bool },
    /// A postmaster out of recovery.
    Primary,
    /// A postmaster in recovery, following `upstream` (`None`: not known to follow anyone);
    /// `stalled`: it has not streamed for a while although the holder renews (diverged, or the
    /// WAL it needs is gone), so it must be rewound or cloned again.
    Standby {
        upstream: Option<Upstream>,
        stalled: bool,
    },
    /// A standby asked to promote, still in recovery (a promotion is asynchronous: replaying a
    /// backlog can take long).
    Promoting,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing to change.
    Wait,
    /// First start of the holder: initdb and the roles.
    Initdb,
    /// Start as primary (a stopped standby is started and then promoted).
    StartPrimary,
    /// Start as a standby streaming from `upstream`.
    StartStandby { upstream: Upstream },
    /// First start of a non-holder: `pg_basebackup` from the holder.
    Clone { from: String },
    /// A non-holder with another system's data: kept aside, then cloned from the holder.
    Reclone { from: String },
    /// A former primary that is not the holder: `pg_rewind` from the holder. `stalled`: a
    /// standby that stopped streaming, which is cloned again if there is nothing to rewind
    /// (the WAL it needs is gone).
    Rewind { from: String, stalled: bool },
    /// A running standby that became the holder.
    Promote,
    /// The holder that must not serve: no data (or another system's) once the cluster has
    /// bootstrapped, or asked by the operator to release. It stops renewing so that the Lease
    /// expires and a replica is promoted; it never runs initdb over a cluster that served.
    Abstain,
    /// A running standby whose upstream is not the holder (or not at its published address).
    Repoint { upstream: Upstream },
    /// Immediate stop: only a holder with a fresh Lease may run as primary.
    Fence,
    /// Switchover: checkpoint, fast shutdown (which waits until connected standbys have the
    /// last WAL), then release the Lease naming the final checkpoint's location.
    Demote,
}

/// Decides the next step for pod `me`. `last_renew`: when the last successful renew started.
pub fn decide(
    lease: Option<&LeaseView>,
    me: &str,
    now: Instant,
    last_renew: Option<Instant>,
    local: &Local,
) -> Action {
    let Some(lease) = lease else {
        // Never read the Lease: nobody told us to be primary.
        return match local {
            Local::Primary | Local::Promoting => Action::Fence,
            _ => Action::Wait,
        };
    };
    let bootstrapped = lease.system_identifier.is_some();
    match lease.holder.as_deref() {
        Some(holder) if holder == me && lease.release_requested.as_deref() == Some(me) => {
            match local {
                Local::Primary | Local::Standby { .. } | Local::Promoting => Action::Fence,
                _ => Action::Abstain,
            }
        }
        Some(holder) if holder == me && lease.switchover_to.as_deref().is_some_and(|t| t != me) => {
            let fresh = last_renew
                .is_some_and(|at| now.saturating_duration_since(at) < lease.renew_deadline());
            match local {
                Local::Primary if !fresh => Action::Fence,
                Local::Primary | Local::Stopped { standby: false } => Action::Demote,
                Local::Promoting => Action::Fence,
                _ => Action::Wait,
            }
        }
        Some(holder) if holder == me => {
            let fresh = last_renew
                .is_some_and(|at| now.saturating_duration_since(at) < lease.renew_deadline());
            match (local, fresh) {
                (Local::Primary, true) => Action::Wait,
                (Local::Primary | Local::Promoting, false) => Action::Fence,
                // Without usable data once the cluster has bootstrapped: never initdb.
                (Local::NoData, _) if bootstrapped => Action::Abstain,
                (Local::Foreign, _) => Action::Abstain,
                (_, false) => Action::Wait,
                (Local::NoData, true) => Action::Initdb,
                (Local::Stopped { .. }, true) => Action::StartPrimary,
                (Local::Standby { .. }, true) => Action::Promote,
                (Local::Promoting, true) => Action::Wait,
            }
        }
        Some(holder) => {
            let upstream = Upstream {
                name: holder.to_string(),
                address: lease.holder_address.clone(),
            };
            let from = holder.to_string();
            match local {
                Local::Primary | Local::Promoting => Action::Fence,
                Local::NoData => Action::Clone { from },
                Local::Foreign => Action::Reclone { from },
                Local::Stopped { standby: false } => Action::Rewind {
                    from,
                    stalled: false,
                },
                Local::Stopped { standby: true } => Action::StartStandby { upstream },
                Local::Standby { stalled: true, .. } => Action::Rewind {
                    from,
                    stalled: true,
                },
                Local::Standby {
                    upstream: Some(current),
                    ..
                } if *current == upstream => Action::Wait,
                Local::Standby { .. } => Action::Repoint { upstream },
            }
        }
        // No holder: no primary anywhere; replicas keep what they have.
        None => match local {
            Local::Primary | Local::Promoting => Action::Fence,
            _ => Action::Wait,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `decide` for pod `demo-0` with a 6 s Lease held by `holder`, renewed `renewed` seconds
    /// ago (None: never).
    fn check(holder: Option<&str>, renewed: Option<f64>, local: Local, expected: Action) {
        check_at(holder, None, renewed, local, expected);
    }

    /// A 6 s Lease of members demo-0 and demo-1 held by `holder` (published at `address`),
    /// recording system identifier `system` and a release request for `release`.
    fn lease(
        holder: Option<&str>,
        address: Option<&str>,
        system: Option<&str>,
        release: Option<&str>,
    ) -> LeaseView {
        LeaseView {
            holder: holder.map(str::to_string),
            duration: Duration::from_secs(6),
            instances: vec!["demo-0".into(), "demo-1".into()],
            switchover_to: None,
            holder_address: address.map(str::to_string),
            system_identifier: system.map(str::to_string),
            release_requested: release.map(str::to_string),
        }
    }

    /// `check` with the holder published at `address`.
    fn check_at(
        holder: Option<&str>,
        address: Option<&str>,
        renewed: Option<f64>,
        local: Local,
        expected: Action,
    ) {
        let now = Instant::now();
        let lease = lease(holder, address, None, None);
        let last_renew = renewed.and_then(|s| now.checked_sub(Duration::from_secs_f64(s)));
        let got = decide(Some(&lease), "demo-0", now, last_renew, &local);
        assert_eq!(
            got, expected,
            "holder {holder:?}, renewed {renewed:?}, {local:?}"
        );
    }

    fn standby(upstream: Option<&str>) -> Local {
        Local::Standby {
            upstream: upstream.map(Upstream::named),
            stalled: false,
        }
    }

    const ME: Option<&str> = Some("demo-0");
    const OTHER: Option<&str> = Some("demo-1");
    const FRESH: Option<f64> = Some(0.5);

    #[test]
    fn fresh_holder_initializes_starts_and_keeps_running_as_primary() {
        check(ME, FRESH, Local::NoData, Action::Initdb);
        let stopped = Local::Stopped { standby: false };
        check(ME, FRESH, stopped, Action::StartPrimary);
        check(ME, FRESH, Local::Primary, Action::Wait);
    }

    #[test]
    fn holder_fences_once_the_renew_deadline_passes() {
        // Deadline: 6 s - 2 s.
        check(ME, Some(3.9), Local::Primary, Action::Wait);
        check(ME, Some(4.0), Local::Primary, Action::Fence);
        check(ME, None, Local::Primary, Action::Fence);
    }

    #[test]
    fn stale_holder_starts_nothing() {
        for local in [
            Local::NoData,
            Local::Stopped { standby: false },
            standby(None),
        ] {
            check(ME, Some(10.0), local, Action::Wait);
        }
    }

    #[test]
    fn standby_that_becomes_fresh_holder_promotes() {
        check(ME, FRESH, standby(Some("demo-1")), Action::Promote);
    }

    #[test]
    fn non_holder_clones_follows_rewinds_and_fences() {
        let from = || "demo-1".to_string();
        check(OTHER, None, Local::NoData, Action::Clone { from: from() });
        check(OTHER, None, Local::Primary, Action::Fence);
        let former_primary = Local::Stopped { standby: false };
        let rewind = Action::Rewind {
            from: from(),
            stalled: false,
        };
        check(OTHER, None, former_primary, rewind);
        let stopped_standby = Local::Stopped { standby: true };
        let start = Action::StartStandby {
            upstream: Upstream::named("demo-1"),
        };
        check(OTHER, None, stopped_standby, start);
        let repoint = Action::Repoint {
            upstream: Upstream::named("demo-1"),
        };
        check(OTHER, None, standby(Some("demo-2")), repoint);
        check(OTHER, None, standby(Some("demo-1")), Action::Wait);
    }

    #[test]
    fn a_standby_follows_the_holder_to_its_published_address() {
        let at = |ip: &str| Upstream {
            name: "demo-1".into(),
            address: Some(ip.into()),
        };
        let on = |ip: &str| Local::Standby {
            upstream: Some(at(ip)),
            stalled: false,
        };
        let start = Action::StartStandby {
            upstream: at("10.0.0.7"),
        };
        let stopped = Local::Stopped { standby: true };
        check_at(OTHER, Some("10.0.0.7"), None, stopped, start);
        check_at(OTHER, Some("10.0.0.7"), None, on("10.0.0.7"), Action::Wait);
        // The holder's pod was recreated with a new IP: repoint at once.
        let moved = Action::Repoint {
            upstream: at("10.0.0.9"),
        };
        check_at(OTHER, Some("10.0.0.9"), None, on("10.0.0.7"), moved);
        // Published by name only (or for another holder): the DNS name again.
        let by_name = Action::Repoint {
            upstream: Upstream::named("demo-1"),
        };
        check_at(OTHER, None, None, on("10.0.0.7"), by_name);
    }

    #[test]
    fn asked_to_switch_over_the_holder_demotes_unless_it_must_fence() {
        let now = Instant::now();
        let lease = LeaseView {
            holder: ME.map(str::to_string),
            duration: Duration::from_secs(6),
            instances: vec!["demo-0".into(), "demo-1".into()],
            switchover_to: OTHER.map(str::to_string),
            holder_address: None,
            system_identifier: None,
            release_requested: None,
        };
        let fresh = now.checked_sub(Duration::from_millis(500));
        let stale = now.checked_sub(Duration::from_secs(5));
        let decide_as =
            |renewed, local: Local| decide(Some(&lease), "demo-0", now, renewed, &local);
        assert_eq!(decide_as(fresh, Local::Primary), Action::Demote);
        assert_eq!(decide_as(stale, Local::Primary), Action::Fence);
        // Stopped after the fast shutdown: the release is (re)tried, fresh or not.
        let shut_down = Local::Stopped { standby: false };
        assert_eq!(decide_as(stale, shut_down), Action::Demote);
        assert_eq!(decide_as(fresh, standby(None)), Action::Wait);
        assert_eq!(decide_as(fresh, Local::NoData), Action::Wait);
        // The target of a switchover is not asked to do anything until it holds the Lease.
        let target = decide(Some(&lease), "demo-1", now, None, &standby(Some("demo-0")));
        assert_eq!(target, Action::Wait);
    }

    #[test]
    fn without_holder_or_lease_nobody_is_primary() {
        check(None, FRESH, Local::Primary, Action::Fence);
        check(None, FRESH, Local::NoData, Action::Wait);
        check(None, FRESH, standby(None), Action::Wait);
        let now = Instant::now();
        assert_eq!(
            decide(None, "demo-0", now, Some(now), &Local::Primary),
            Action::Fence
        );
        assert_eq!(
            decide(None, "demo-0", now, Some(now), &Local::NoData),
            Action::Wait
        );
    }

    /// `decide` for demo-0 with the Lease held by `holder`, renewed `renewed` s ago, recording
    /// system identifier `system` and a release request for `release`.
    fn decide_with(
        holder: Option<&str>,
        renewed: Option<f64>,
        system: Option<&str>,
        release: Option<&str>,
        local: &Local,
    ) -> Action {
        let now = Instant::now();
        let lease = lease(holder, None, system, release);
        let last_renew = renewed.and_then(|s| now.checked_sub(Duration::from_secs_f64(s)));
        decide(Some(&lease), "demo-0", now, last_renew, local)
    }

    #[test]
    fn a_holder_without_data_never_runs_initdb_once_the_cluster_has_bootstrapped() {
        let bootstrapped = Some("7401");
        assert_eq!(
            decide_with(ME, FRESH, bootstrapped, None, &Local::NoData),
            Action::Abstain
        );
        assert_eq!(
            decide_with(ME, None, bootstrapped, None, &Local::NoData),
            Action::Abstain,
            "not even before its first renew"
        );
        assert_eq!(
            decide_with(ME, FRESH, bootstrapped, None, &Local::Foreign),
            Action::Abstain
        );
        // A new cluster: the first holder initialises it.
        assert_eq!(
            decide_with(ME, FRESH, None, None, &Local::NoData),
            Action::Initdb
        );
        // A member with another system's data clones the holder again.
        assert_eq!(
            decide_with(OTHER, None, bootstrapped, None, &Local::Foreign),
            Action::Reclone {
                from: "demo-1".into()
            }
        );
    }

    #[test]
    fn a_pending_promotion_waits_while_fresh_and_is_fenced_otherwise() {
        check(ME, FRESH, Local::Promoting, Action::Wait);
        check(ME, Some(4.0), Local::Promoting, Action::Fence);
        // The Lease moved on while the promotion was pending: it must never complete.
        check(OTHER, None, Local::Promoting, Action::Fence);
        check(None, FRESH, Local::Promoting, Action::Fence);
    }

    #[test]
    fn a_server_out_of_recovery_that_is_not_the_fresh_holder_is_fenced() {
        // The manager started it as a standby; a user's pg_promote() (or a promotion it gave
        // up waiting for) took it out of recovery: the server's own answer makes it Primary.
        check(OTHER, None, Local::Primary, Action::Fence);
        check(ME, Some(5.0), Local::Primary, Action::Fence);
    }

    #[test]
    fn a_standby_that_stopped_streaming_is_rewound_or_cloned_again() {
        let stalled = Local::Standby {
            upstream: Some(Upstream::named("demo-1")),
            stalled: true,
        };
        check(
            OTHER,
            None,
            stalled,
            Action::Rewind {
                from: "demo-1".into(),
                stalled: true,
            },
        );
    }

    #[test]
    fn a_holder_asked_to_release_fences_and_abstains() {
        let asked = Some("demo-0");
        assert_eq!(
            decide_with(ME, FRESH, Some("7401"), asked, &Local::Primary),
            Action::Fence
        );
        assert_eq!(
            decide_with(
                ME,
                FRESH,
                Some("7401"),
                asked,
                &Local::Stopped { standby: false }
            ),
            Action::Abstain
        );
        // A request naming an earlier holder is not this one's.
        assert_eq!(
            decide_with(ME, FRESH, Some("7401"), Some("demo-2"), &Local::Primary),
            Action::Wait
        );
    }
}
