//! The primary's physical slots: one `tusk_<pod>` per other member named in the Lease's
//! `tusk.dev/instances`, and no other `tusk_*` slot (a removed member's slot would keep WAL
//! forever).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_one_slot_per_other_member_and_drops_the_rest() {
        let members = ["demo-0", "demo-1", "demo-2"].map(String::from);
        let existing = ["tusk_demo_1", "tusk_demo_5"].map(String::from);
        let (create, drop) = plan("demo-0", &members, &existing);
        assert_eq!(create, vec!["tusk_demo_2".to_string()]);
        assert_eq!(drop, vec!["tusk_demo_5".to_string()]);
    }
}
