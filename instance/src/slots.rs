//! The primary's physical slots: one `tusk_<pod>` per other member named in the Lease's
//! `tusk.dev/instances`, and no other `tusk_*` slot (a removed member's slot would keep WAL
//! forever) — and a bound on the WAL any slot may keep, so a standby that stopped consuming
//! never fills the primary's volume (the primary would then crash-loop while its holder
//! renews, and nothing would fail over).

use std::collections::BTreeSet;

use crate::config::slot_name;
use crate::context::Context;
use crate::error::Error;
use crate::sql::connect;

/// The slots to create and to drop, given the existing `tusk_*` slots.
pub fn plan(me: &str, members: &[String], existing: &[String]) -> (Vec<String>, Vec<String>) {
    let wanted: BTreeSet<String> = members
        .iter()
        .filter(|m| m.as_str() != me)
        .map(|m| slot_name(m))
        .collect();
    let existing: BTreeSet<String> = existing.iter().cloned().collect();
    (
        wanted.difference(&existing).cloned().collect(),
        existing.difference(&wanted).cloned().collect(),
    )
}

/// Brings the slots in line with `members`. An empty member list (annotation missing) changes
/// nothing rather than dropping every slot.
pub async fn sync(ctx: &Context, members: &[String]) -> Result<(), Error> {
    if members.is_empty() {
        return Ok(());
    }
    let client = connect(ctx, "postgres").await?;
    let existing: Vec<String> = client
        .query(
            "SELECT slot_name::text FROM pg_replication_slots \
             WHERE slot_type = 'physical' AND slot_name LIKE 'tusk\\_%'",
            &[],
        )
        .await
        .map_err(Error::sql("listing replication slots"))?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let (create, drop) = plan(ctx.me(), members, &existing);
    for slot in create {
        // Reserve WAL now: the member may be cloning or rewinding from an older point.
        client
            .execute(
                "SELECT pg_create_physical_replication_slot($1, true)",
                &[&slot],
            )
            .await
            .map_err(Error::sql(format!("creating slot {slot}")))?;
        tracing::info!(slot, "replication slot created");
    }
    for slot in drop {
        match client
            .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
            .await
        {
            Ok(_) => tracing::info!(slot, "replication slot dropped"),
            // An active slot cannot be dropped; the next round tries again.
            Err(e) => tracing::warn!(slot, error = %e, "cannot drop replication slot yet"),
        }
    }
    Ok(())
}

/// The share of the data volume that slots may keep WAL for, unless `spec.parameters` sets
/// `max_slot_wal_keep_size`. Past it the slot is invalidated: its standby stops streaming and is
/// cloned again (supervisor: a stalled standby), which costs a clone, not the primary.
const SLOT_SHARE_OF_VOLUME: u64 = 2;
/// Never less than this, on a tiny volume.
const MIN_SLOT_KEEP_MB: u64 = 128;

/// `max_slot_wal_keep_size` for a volume of `volume_bytes`, in MB.
pub fn slot_keep_mb(volume_bytes: u64) -> u64 {
    (volume_bytes / SLOT_SHARE_OF_VOLUME / (1024 * 1024)).max(MIN_SLOT_KEEP_MB)
}

/// Whether the configuration file sets `key` (the user's `spec.parameters`): then it is left to
/// them.
fn configured(config: &str, key: &str) -> bool {
    config.lines().any(|line| {
        let line = line.trim_start();
        !line.starts_with('#') && line.split(['=', ' ', '\t']).next() == Some(key)
    })
}

/// Keeps `max_slot_wal_keep_size` at [`slot_keep_mb`] of the actual volume (which may have
/// grown), with `ALTER SYSTEM` and a reload: never a restart.
pub async fn bound_retention(ctx: &Context) -> Result<(), Error> {
    if let Some(path) = &ctx.args.config_file {
        let config = std::fs::read_to_string(path).unwrap_or_default();
        if configured(&config, "max_slot_wal_keep_size") {
            return Ok(());
        }
    }
    let Some(volume) = crate::metrics::volume(ctx.pgdata()) else {
        return Ok(());
    };
    let wanted = format!("{}MB", slot_keep_mb(volume.size));
    let client = connect(ctx, "postgres").await?;
    let current: String = client
        .query_one("SHOW max_slot_wal_keep_size", &[])
        .await
        .map_err(Error::sql("reading max_slot_wal_keep_size"))?
        .get(0);
    if current == wanted {
        return Ok(());
    }
    let sql = format!("ALTER SYSTEM SET max_slot_wal_keep_size = '{wanted}'");
    client
        .batch_execute(&sql)
        .await
        .map_err(Error::sql("setting max_slot_wal_keep_size"))?;
    client
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .map_err(Error::sql("reloading the configuration"))?;
    tracing::info!(
        from = current,
        to = wanted,
        "max_slot_wal_keep_size set from the volume's size"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_may_keep_half_the_volume_unless_the_user_says_otherwise() {
        assert_eq!(slot_keep_mb(10 << 30), 5120);
        assert_eq!(slot_keep_mb(100 << 20), MIN_SLOT_KEEP_MB);
        let user = "port = 5432\n# spec.parameters\nmax_slot_wal_keep_size = '1GB'\n";
        assert!(configured(user, "max_slot_wal_keep_size"));
        assert!(!configured(
            "# max_slot_wal_keep_size = 1\n",
            "max_slot_wal_keep_size"
        ));
    }

    #[test]
    fn keeps_one_slot_per_other_member_and_drops_the_rest() {
        let members = ["demo-0", "demo-1", "demo-2"].map(String::from);
        let existing = ["tusk_demo_1", "tusk_demo_5"].map(String::from);
        let (create, drop) = plan("demo-0", &members, &existing);
        assert_eq!(create, vec!["tusk_demo_2".to_string()]);
        assert_eq!(drop, vec!["tusk_demo_5".to_string()]);
    }
}
