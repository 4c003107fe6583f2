//! What the primary step found and did, handed to the status and the Events of the reconcile.

use std::time::Duration;

use crate::crd::{Failover, InstanceState};
use crate::runtime::apply::Written;

/// What the primary step found and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrimaryState {
    /// The Lease holder: the only instance that may accept writes.
    pub current: Option<String>,
    /// Every database pod, with the role label it carries now.
    pub instances: Vec<InstanceState>,
    /// Set when this reconcile handed the Lease to another instance.
    pub failover: Option<Failover>,
    /// The instance a switchover in progress hands the Lease to.
    pub target: Option<String>,
    /// What this reconcile's switchover step started, refused or abandoned.
    pub switchover: Option<SwitchoverNote>,
    /// The switchover request annotation was carried out or refused: it is removed once the
    /// status recording that is written.
    pub request_done: bool,
    /// The replica this reconcile restarted on the StatefulSet's new revision.
    pub restarted: Option<String>,
    /// The rollout waits for the primary to restart in place with these lowered settings.
    pub primary_first: Option<Vec<String>>,
    /// A failover is due but no replica can be promoted: why.
    pub stuck: Option<String>,
    /// Look again this soon: a lost primary is being watched.
    pub recheck: Option<Duration>,
    pub writes: Vec<Written>,
    /// The database system identifier the first holder recorded on the Lease.
    pub system_identifier: Option<String>,
    /// The holder renewed without serving for too long and was asked to release: why.
    pub release_requested: Option<String>,
    /// `-rw` was emptied by this reconcile before a handover: the cache does not show it yet,
    /// so routing it again is sent whatever the cache says (a handover that lost its conflict
    /// gives the holder back its clients at once).
    pub unrouted: bool,
    /// Pods whose role label this reconcile already set, and to what (the cache does not show
    /// it yet).
    pub(super) relabelled: Vec<(String, &'static str)>,
}

/// A switchover step worth an Event.
#[derive(Clone, Debug, PartialEq)]
pub enum SwitchoverNote {
    Started {
        from: String,
        to: String,
        why: String,
    },
    Rejected(String),
    Aborted(String),
    /// The operator's own switchover cannot start (no replica to take over).
    Blocked(String),
}

impl PrimaryState {
    /// The state of a cluster whose Lease `pod` holds, with nothing else known.
    pub fn held_by(pod: &str) -> Self {
        Self {
            current: Some(pod.to_owned()),
            ..Self::default()
        }
    }
}
