//! The old primary's steps of an online upgrade as its manager serves them to the operator
//! (`tusk_contract::upgrade_source`): the mechanism of `upgrade::source` and
//! `upgrade::source_access`, run as the superuser on the local socket.

use std::time::Duration;

use tusk_contract::upgrade_source::{Confirmation, Frozen, Published, PublishedDatabase};

use crate::context::Context;
use crate::error::Error;
use crate::upgrade::{Database, Server, conninfo_value, slot_name, source, source_access};

/// The local server as the PostgreSQL programs reach it: the superuser on the socket (peer).
pub fn local(ctx: &Context) -> Server {
    Server {
        conninfo: format!(
            "host={} port={} user=postgres",
            conninfo_value(&ctx.args.socket_dir.display().to_string()),
            ctx.args.pg_port
        ),
        bin_dir: ctx.args.pg_bin_dir.clone(),
    }
}

/// Every database published, the upgrade role allowed in, schema changes refused.
pub async fn publish(ctx: &Context) -> Result<Published, Error> {
    let (server, runner) = (local(ctx), &*ctx.reaper);
    let databases = source::databases(runner, &server).await?;
    source::publish(runner, &server, &databases).await?;
    source_access::allow(runner, &server, &databases).await?;
    Ok(Published {
        databases: databases.iter().map(published).collect(),
    })
}

fn published(db: &Database) -> PublishedDatabase {
    PublishedDatabase {
        name: db.name.clone(),
        oid: db.oid,
        owner: db.owner.clone(),
        slot: slot_name(db.oid),
    }
}

pub async fn freeze(ctx: &Context) -> Result<Frozen, Error> {
    let lsn = source::freeze(&*ctx.reaper, &local(ctx)).await?;
    Ok(Frozen { lsn })
}

/// Whether the new side has confirmed `lsn` in every database there is now: a database
/// created since the copy started has no subscription, so its slot is behind for good and the
/// cut-over cannot complete without it.
pub async fn confirmed(ctx: &Context, lsn: &str) -> Result<Confirmation, Error> {
    if !is_lsn(lsn) {
        return Err(Error::State(format!("{lsn:?} is not a WAL position")));
    }
    let (server, runner) = (local(ctx), &*ctx.reaper);
    let databases = source::databases(runner, &server).await?;
    let slots: Vec<String> = databases.iter().map(|d| slot_name(d.oid)).collect();
    let behind = source::behind(runner, &server, &slots, lsn).await?;
    Ok(Confirmation {
        lsn: lsn.to_owned(),
        behind,
    })
}

pub async fn thaw(ctx: &Context) -> Result<(), Error> {
    source::thaw(&*ctx.reaper, &local(ctx)).await
}

/// How long the slots of subscriptions just ended may stay active (their walsenders exit
/// asynchronously after their sessions are terminated).
const SLOTS_RELEASED: Duration = Duration::from_secs(10);

/// The guard, the role (its sessions ended), the publications and every slot the subscriptions
/// left, those of the new side's table synchronisation too when `subscriber` names its system:
/// nothing of the upgrade stays on the old primary.
pub async fn unpublish(ctx: &Context, subscriber: Option<&str>) -> Result<(), Error> {
    let (server, runner) = (local(ctx), &*ctx.reaper);
    let databases = source::databases(runner, &server).await?;
    source_access::revoke(runner, &server, &databases).await?;
    let deadline = tokio::time::Instant::now() + SLOTS_RELEASED;
    loop {
        let left = source::unpublish(runner, &server, &databases, subscriber).await?;
        if left.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::State(format!(
                "replication slot(s) {} still in use",
                left.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `X/Y` in hexadecimal, as PostgreSQL writes a WAL position.
fn is_lsn(value: &str) -> bool {
    let hex = |s: &str| !s.is_empty() && s.len() <= 8 && s.chars().all(|c| c.is_ascii_hexdigit());
    value.split_once('/').is_some_and(|(a, b)| hex(a) && hex(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_wal_position_is_taken() {
        assert!(is_lsn("0/3000148"));
        assert!(is_lsn("1A/FF"));
        for bad in ["", "0/", "/1", "0/1/2", "0'/1", "123456789/1", "x/1"] {
            assert!(!is_lsn(bad), "{bad:?}");
        }
    }
}
