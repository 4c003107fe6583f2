//! Preferred synchronous durability (`TUSK_SYNC_DURABILITY=preferred`): while this pod is the
//! primary with a fresh Lease, it keeps `synchronous_standby_names` at `ANY k (…the other
//! members…)` with `k = min(n, members streaming)`, and empty when none streams, so commits
//! wait for as many replicas as stream and never for a missing one.
//!
//! The value is set with `ALTER SYSTEM` (postgresql.auto.conf overrides the ConfigMap's file,
//! which leaves the setting out with this durability) and a reload. The work runs as its own
//! task: a hung query must never delay the loop that fences. Every postmaster start first
//! drops the setting from auto.conf ([`drop_stale`]): a standby cloned or rewound from a
//! primary carries its value, which must not be in force after a promotion, and a cluster
//! changed to `required` must get the ConfigMap's value, not a leftover.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_postgres::Client;

use crate::context::Context;
use crate::error::Error;
use crate::role_source::Observed;
use crate::sql::{connect, quote_literal};

pub const SETTING: &str = "synchronous_standby_names";
/// How often the streaming replicas are looked at: a replica that went away stalls commits
/// for at most about this long once PostgreSQL has noticed (its walsender exited).
const EVERY: Duration = Duration::from_millis(500);
const ROUND_TIMEOUT: Duration = Duration::from_secs(5);

/// The value for pod `me` among `members` (the Lease's `tusk.dev/instances`) while `streaming`
/// (application names in state `streaming`) replicate from it. `None` when the member list is
/// unknown: then nothing is changed. Names are every other member, so the value changes only
/// with `k`; a member that does not stream cannot confirm anyway.
pub fn desired(me: &str, members: &[String], streaming: &[String], number: u32) -> Option<String> {
    let others: Vec<&String> = members.iter().filter(|m| m.as_str() != me).collect();
    if others.is_empty() {
        return None;
    }
    let streaming = others.iter().filter(|m| streaming.contains(m)).count();
    let k = streaming.min(usize::try_from(number).unwrap_or(usize::MAX));
    if k == 0 {
        return Some(String::new());
    }
    let names: Vec<String> = others.iter().map(|m| format!("\"{m}\"")).collect();
    Some(format!("ANY {k} ({})", names.join(", ")))
}

/// The members while pod `me` holds a Lease it renewed within the renew deadline; `None`
/// otherwise (a primary about to fence has nothing to maintain).
pub fn members_while_primary(observed: &Observed, me: &str, now: Instant) -> Option<Vec<String>> {
    let lease = observed.lease.as_ref()?;
    let fresh = observed
        .last_renew
        .is_some_and(|at| now.saturating_duration_since(at) < lease.renew_deadline());
    (lease.holder.as_deref() == Some(me) && fresh).then(|| lease.instances.clone())
}

/// Drops a value `ALTER SYSTEM` left in auto.conf; called before every postmaster start.
pub fn drop_stale(pgdata: &Path) -> Result<(), Error> {
    if crate::auto_conf::remove(pgdata, &[SETTING])? {
        tracing::info!("dropped {SETTING} from postgresql.auto.conf before the start");
    }
    Ok(())
}

/// Starts the background task that keeps the setting while this pod is primary.
pub fn spawn(ctx: Arc<Context>, observed: watch::Receiver<Observed>, number: u32) {
    tokio::spawn(async move {
        let mut link = Link::default();
        let mut failing = false;
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let members = members_while_primary(&observed.borrow(), ctx.me(), Instant::now());
            let Some(members) = members else {
                link = Link::default();
                continue;
            };
            let round = round(&ctx, &mut link, &members, number);
            let error = match tokio::time::timeout(ROUND_TIMEOUT, round).await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {ROUND_TIMEOUT:?}")),
            };
            match error {
                None if failing => {
                    tracing::info!("{SETTING} maintained again");
                    failing = false;
                }
                None => {}
                Some(e) => {
                    link = Link::default();
                    // Once per streak: a primary that is starting refuses connections a while.
                    if !failing {
                        tracing::warn!(error = %e, "maintaining {SETTING}");
                    }
                    failing = true;
                }
            }
        }
    });
}

/// The task's connection to the local server, and whether a commit should nudge the replicas.
#[derive(Default)]
struct Link {
    client: Option<Client>,
    /// The setting changed to a non-empty value: once the reload is in force, a commit makes
    /// every streaming replica report. A lowered `ANY k` releases the commits already waiting
    /// only when a replica reports (walsenders check waiters on replies), which an idle
    /// replica does every `wal_receiver_status_interval` (10 s): too late.
    nudge: bool,
}

/// One look: the streaming members, and the setting changed when it differs from theirs.
async fn round(
    ctx: &Context,
    link: &mut Link,
    members: &[String],
    number: u32,
) -> Result<(), Error> {
    if link.client.as_ref().is_none_or(Client::is_closed) {
        link.client = Some(connect(ctx, "postgres").await?);
    }
    let Some(db) = link.client.as_ref() else {
        return Ok(());
    };
    let row = db
        .query_one(
            "SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names'), \
             ARRAY(SELECT application_name FROM pg_stat_replication WHERE state = 'streaming')",
            &[],
        )
        .await
        .map_err(Error::sql("reading pg_stat_replication"))?;
    let (in_recovery, current, streaming): (bool, String, Vec<String>) =
        (row.get(0), row.get(1), row.get(2));
    // A standby (not promoted yet) has nothing to wait for.
    if in_recovery {
        return Ok(());
    }
    let Some(wanted) = desired(ctx.me(), members, &streaming, number) else {
        return Ok(());
    };
    if wanted == current {
        // This session sees the reload, so the walsenders (signalled with it) do too.
        if std::mem::take(&mut link.nudge) {
            nudge(db).await?;
        }
        return Ok(());
    }
    let set = format!("ALTER SYSTEM SET {SETTING} = {}", quote_literal(&wanted)?);
    db.batch_execute(&set)
        .await
        .map_err(Error::sql(format!("ALTER SYSTEM SET {SETTING}")))?;
    db.batch_execute("SELECT pg_reload_conf()")
        .await
        .map_err(Error::sql("pg_reload_conf"))?;
    tracing::info!(from = %current, to = %wanted, ?streaming, "{SETTING} changed");
    // Empty needs none: PostgreSQL releases every waiting commit when the setting empties.
    link.nudge = !wanted.is_empty();
    Ok(())
}

/// A commit of its own (an xid, nothing else) that waits only for the local flush: the
/// replicas receive it and report, and their reports release the commits the new value
/// allows.
async fn nudge(db: &Client) -> Result<(), Error> {
    db.batch_execute(
        "BEGIN; SET LOCAL synchronous_commit = local; SELECT pg_current_xact_id(); COMMIT",
    )
    .await
    .map_err(Error::sql("committing to make the replicas report"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::LeaseView;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn waits_for_as_many_streaming_members_as_there_are_up_to_n() {
        let members = names(&["demo-0", "demo-1", "demo-2"]);
        let want = |streaming: &[&str], n| desired("demo-0", &members, &names(streaming), n);
        let all = "(\"demo-1\", \"demo-2\")";
        assert_eq!(want(&["demo-1", "demo-2"], 1), Some(format!("ANY 1 {all}")));
        assert_eq!(want(&["demo-1", "demo-2"], 2), Some(format!("ANY 2 {all}")));
        assert_eq!(want(&["demo-2"], 2), Some(format!("ANY 1 {all}")));
        // None streams: commits do not wait at all.
        assert_eq!(want(&[], 2), Some(String::new()));
    }

    #[test]
    fn only_other_members_count_as_streaming() {
        let members = names(&["demo-0", "demo-1"]);
        // pg_basebackup's WAL stream, an outsider, and this pod's own name confirm nothing.
        let streaming = names(&["pg_basebackup", "demo-7", "demo-0"]);
        assert_eq!(
            desired("demo-0", &members, &streaming, 1),
            Some(String::new())
        );
        let streaming = names(&["demo-1", "pg_basebackup"]);
        assert_eq!(
            desired("demo-0", &members, &streaming, 3),
            Some("ANY 1 (\"demo-1\")".to_string())
        );
    }

    #[test]
    fn without_a_member_list_nothing_is_changed() {
        assert_eq!(desired("demo-0", &[], &names(&["demo-1"]), 1), None);
        assert_eq!(desired("demo-0", &names(&["demo-0"]), &[], 1), None);
    }

    #[test]
    fn only_a_holder_with_a_fresh_lease_maintains_the_setting() {
        let now = Instant::now();
        let observed = |holder: &str, renewed_secs_ago: Option<u64>| Observed {
            lease: Some(LeaseView {
                holder: Some(holder.to_string()),
                duration: Duration::from_secs(6),
                instances: names(&["demo-0", "demo-1"]),
                switchover_to: None,
                holder_address: None,
                system_identifier: None,
                release_requested: None,
            }),
            last_renew: renewed_secs_ago.and_then(|s| now.checked_sub(Duration::from_secs(s))),
            ..Observed::default()
        };
        let members = members_while_primary(&observed("demo-0", Some(1)), "demo-0", now);
        assert_eq!(members, Some(names(&["demo-0", "demo-1"])));
        // Renew deadline 4 s: past it the holder fences; another holder is not us.
        assert_eq!(
            members_while_primary(&observed("demo-0", Some(5)), "demo-0", now),
            None
        );
        assert_eq!(
            members_while_primary(&observed("demo-0", None), "demo-0", now),
            None
        );
        assert_eq!(
            members_while_primary(&observed("demo-1", Some(1)), "demo-0", now),
            None
        );
        assert_eq!(
            members_while_primary(&Observed::default(), "demo-0", now),
            None
        );
    }
}
