//! Carrying out what [`decide`](crate::decide) chose: one step per tick. A step that takes
//! long while the server accepts writes (a demotion) advances one phase per call.

use std::time::{Duration, Instant};

use super::{Demotion, Supervisor};
use crate::decide::{Action, LeaseView};
use crate::error::Error;
use crate::pgdata;
use crate::postmaster::Listen;
use crate::report::Role;
use crate::rewind::Rejoined;

impl Supervisor {
    pub(super) async fn execute(
        &mut self,
        action: &Action,
        lease: Option<&LeaseView>,
    ) -> Result<(), Error> {
        let ctx = self.ctx.clone();
        let expected = lease.and_then(|l| l.system_identifier.clone());
        match action {
            Action::Wait => {}
            Action::Abstain => self.set_role(Role::Lost),
            Action::Initdb => {
                self.set_role(Role::Initializing);
                match &self.restore {
                    Some(plan) => {
                        if let Err(e) = crate::restore::run(&ctx, plan).await {
                            // Retried with backoff; /status carries it to the cluster's
                            // Restored condition.
                            let note = format!("restoring backup {}: {e}", plan.backup_id);
                            self.set_restore_error(Some(note.clone()));
                            self.events.warning("RestoreFailed", "Restore", note);
                            return Err(e);
                        }
                        self.set_restore_error(None);
                        let note = format!("restored backup {} and recovered", plan.backup_id);
                        self.events.normal("Restored", "Restore", note);
                    }
                    None => pgdata::initdb(&ctx).await?,
                }
            }
            Action::StartPrimary => {
                // A stopped standby starts as one and is promoted next tick: starting it
                // without standby.signal would continue its timeline instead of forking one.
                self.start(Listen::Configured, None)?;
            }
            Action::StartStandby { upstream } => {
                pgdata::write_standby_config(&ctx, upstream)?;
                self.start(Listen::Configured, Some(upstream.clone()))?;
            }
            Action::Clone { from } => {
                self.set_role(Role::Initializing);
                pgdata::clone_from(&ctx, from, expected.as_deref()).await?;
                let note = format!("cloned from {from} with pg_basebackup");
                self.events.normal("Cloned", "Clone", note);
            }
            Action::Reclone { from } => {
                self.set_role(Role::Initializing);
                let why = "the local data belongs to another database system".to_owned();
                let rejoined = crate::rewind::reclone(&ctx, from, expected.as_deref(), why).await?;
                self.report_rejoin(from, &rejoined);
            }
            Action::Rewind { from, stalled } => {
                if let Some(pm) = self.postmaster.take() {
                    // A standby that stopped streaming: stopped cleanly first.
                    pm.stop(libc::SIGINT, Duration::from_secs(60)).await;
                    self.stopped();
                }
                self.set_role(Role::Initializing);
                let rejoined =
                    crate::rewind::rejoin(&ctx, from, *stalled, expected.as_deref()).await?;
                self.report_rejoin(from, &rejoined);
            }
            Action::Promote => {
                // Asked once the server answers; the promotion then runs on its own.
                if self.promoting.is_none() && self.facts().is_some() {
                    crate::promote::request(&ctx).await?;
                    self.promoting = Some(Instant::now());
                    tracing::info!("promotion asked for");
                }
            }
            Action::Repoint { upstream } => {
                pgdata::write_standby_config(&ctx, upstream)?;
                if let Some(pm) = &mut self.postmaster {
                    // primary_conninfo is reloadable: the WAL receiver restarts toward it.
                    pm.reload();
                    pm.upstream = Some(upstream.clone());
                }
                tracing::info!(
                    upstream = upstream.name,
                    address = upstream.address,
                    "following a new upstream"
                );
            }
            Action::Demote => self.demote().await?,
            Action::Fence => self.fence().await,
        }
        Ok(())
    }

    /// One phase of a switchover's demotion: checkpoint, fast shutdown, then the release.
    async fn demote(&mut self) -> Result<(), Error> {
        if self.intent.borrow().release_lsn.is_some() {
            return Ok(());
        }
        let Some(pm) = &self.postmaster else {
            // Shut down: the final checkpoint is the last WAL; release the Lease naming it.
            self.demotion = None;
            let lsn = crate::demote::final_lsn(&self.ctx).await?;
            tracing::info!(final_lsn = lsn, "demoted: releasing the Lease");
            let note = format!(
                "shut down cleanly for a switchover; releasing the Lease at final LSN {lsn}"
            );
            self.events.normal("Demoted", "Switchover", note);
            self.intent
                .send_modify(|intent| intent.release_lsn = Some(lsn));
            return Ok(());
        };
        match &self.demotion {
            None => {
                let ctx = self.ctx.clone();
                let task = tokio::spawn(async move { crate::demote::checkpoint(&ctx).await });
                self.demotion = Some(Demotion::Checkpointing(task));
            }
            Some(Demotion::Checkpointing(task)) if task.is_finished() => {
                pm.signal(libc::SIGINT);
                self.demotion = Some(Demotion::ShuttingDown(Instant::now()));
            }
            Some(Demotion::ShuttingDown(since))
                if since.elapsed() > crate::demote::SHUTDOWN_TIMEOUT =>
            {
                // Not clean: no final LSN will be released, and the operator aborts.
                tracing::warn!("the fast shutdown did not finish in time: SIGKILL");
                pm.signal(libc::SIGKILL);
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// A demotion that is no longer asked for (fenced, or the switchover was withdrawn) stops
    /// where it is; a shutdown already asked for goes on, and the server starts again after.
    pub(super) fn cancel_demotion(&mut self) {
        if let Some(Demotion::Checkpointing(task)) = &self.demotion {
            task.abort();
        }
        if matches!(self.demotion, Some(Demotion::Checkpointing(_))) {
            self.demotion = None;
        }
    }

    async fn fence(&mut self) {
        self.fenced = true;
        self.promoting = None;
        self.cancel_demotion();
        self.demotion = None;
        if let Some(pm) = self.postmaster.take() {
            let status = pm.stop(libc::SIGQUIT, Duration::from_secs(10)).await;
            self.stopped();
            tracing::warn!(%status, "fenced: postmaster stopped immediately");
            let note = "stopped PostgreSQL immediately: this pod may not run as primary \
                        (the Lease is another's, or was not renewed in time)"
                .to_owned();
            self.events.warning("Fenced", "Fence", note);
        }
        // Only now: /status says `fenced` once the postmaster is gone, not before.
        self.publish(None);
    }

    fn report_rejoin(&self, from: &str, rejoined: &Rejoined) {
        match rejoined {
            Rejoined::Rewound => {
                let note = format!("rewound with pg_rewind to follow {from}");
                self.events.normal("Rewound", "Rejoin", note);
            }
            Rejoined::Recloned { why, kept, dropped } => {
                let kept = match kept {
                    Some(path) => {
                        format!("the previous data directory is kept at {}", path.display())
                    }
                    None => "the previous data directory could not be moved and was cleared".into(),
                };
                let note = format!("{why}: cloned {from} again; {kept}");
                self.events.warning("Recloned", "Rejoin", note);
                if let Some(dropped) = dropped {
                    let note = format!(
                        "removed {}, the copy kept by an earlier re-clone, to make room for this one",
                        dropped.display()
                    );
                    self.events.warning("DivergedCopyRemoved", "Rejoin", note);
                }
            }
        }
    }
}
