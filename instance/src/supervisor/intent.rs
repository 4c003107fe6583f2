//! What this manager asks of its role source (`Intent`): to abstain from renewing, to
//! release the Lease at a final LSN, and the database's system identifier to record.

use super::Supervisor;
use crate::decide::{Action, LeaseView};
use crate::monitor::ServerFacts;
use crate::pgdata;
use crate::role_source::Observed;

impl Supervisor {
    /// What the role source should do: abstain while told to (or asked to release), and record
    /// the system identifier of a primary's database.
    pub(super) fn update_intent(
        &mut self,
        lease: Option<&LeaseView>,
        action: &Action,
        facts: Option<&ServerFacts>,
    ) {
        let me = self.ctx.me();
        let asked = lease.is_some_and(|l| l.release_requested.as_deref() == Some(me));
        let abstain = *action == Action::Abstain || asked;
        let system = facts
            .filter(|f| !f.in_recovery)
            .and_then(|f| f.system_identifier.clone());
        self.intent.send_if_modified(|intent| {
            let before = intent.clone();
            intent.abstain = abstain;
            if system.is_some() {
                intent.system_identifier.clone_from(&system);
            }
            *intent != before
        });
        if !abstain {
            self.abstained = None;
            return;
        }
        let why = if asked {
            "the operator asked this holder to release the Lease (it renewed without serving)"
        } else if matches!(action, Action::Abstain) && pgdata::initialized(self.ctx.pgdata()) {
            "the local data belongs to another database system than the cluster's"
        } else {
            "the volume holds no data although the cluster has bootstrapped: it is never \
             initialised again"
        };
        if self.abstained.as_deref() != Some(why) {
            tracing::warn!(why, "not renewing the Lease: a replica takes over");
            let note = format!(
                "{why}; not renewing the Lease so that a replica takes over, then cloning it"
            );
            self.events.warning("LeaseAbandoned", "Abstain", note);
            self.abstained = Some(why.to_owned());
        }
    }

    /// A release request outlives its switchover only until the Lease no longer asks for one
    /// (the operator aborted it, or the Lease has moved on): then the holder renews again.
    pub(super) fn withdraw_release(&self, observed: &Observed) {
        let asked = observed.lease.as_ref().is_some_and(|lease| {
            lease.holder.as_deref() == Some(self.ctx.me()) && lease.switchover_to.is_some()
        });
        if !asked && self.intent.borrow().release_lsn.is_some() {
            self.intent.send_modify(|intent| intent.release_lsn = None);
        }
    }
}
