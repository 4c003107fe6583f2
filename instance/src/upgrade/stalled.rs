//! A table whose synchronisation can never finish, and the way past it: the database's copy
//! started afresh. PostgreSQL's table-sync worker drops its slot on the publisher just before
//! it commits the table's end of synchronisation; a crash between the two (the new side's
//! primary killed mid-copy) leaves the table copied (`f`) with no slot, and the worker asks the
//! old primary for that slot every second, for ever (seen on real pods: a copy stuck at 41 of
//! 42 tables). Only a new copy gets past it: which changes of the main stream that worker still
//! owed its table is known to nobody else.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Database, Runner, SUBSCRIPTION, Server, literal, slot_name};
use crate::error::Error;

/// The tables of `db`'s subscription whose synchronisation waits for a slot the old primary no
/// longer has, by name.
pub async fn stalled(
    runner: &impl Runner,
    source: &Server,
    target: &Server,
    db: &str,
) -> Result<Vec<String>, Error> {
    let copied = copied_unfinished(runner, target, db).await?;
    if copied.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = copied.iter().map(|(slot, _)| literal(slot)).collect();
    let present = first_column(
        source
            .query(
                runner,
                db,
                &format!(
                    "SELECT slot_name FROM pg_replication_slots WHERE slot_name IN ({})",
                    names.join(", ")
                ),
            )
            .await?,
    );
    let missing: Vec<(String, String)> = (copied.into_iter())
        .filter(|(slot, _)| !present.contains(slot))
        .collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    // A worker that just dropped its slot commits the table's end right after: read again, so
    // a table that has just finished is not taken for a stalled one.
    let still = copied_unfinished(runner, target, db).await?;
    Ok(missing
        .into_iter()
        .filter(|entry| still.contains(entry))
        .map(|(_, table)| table)
        .collect())
}

/// `db`'s tables whose rows are copied but whose synchronisation has not ended, with the name
/// of the slot each one's worker streams from (`pg_<subscription>_sync_<table>_<system>`).
async fn copied_unfinished(
    runner: &impl Runner,
    target: &Server,
    db: &str,
) -> Result<Vec<(String, String)>, Error> {
    let sql = format!(
        "SELECT format('pg_%s_sync_%s_%s', s.oid, r.srrelid, c.system_identifier), \
         r.srrelid::regclass::text \
         FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid \
         CROSS JOIN pg_control_system() c \
         WHERE s.subname = {} AND r.srsubstate = 'f' \
         AND s.subdbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         ORDER BY 1",
        literal(SUBSCRIPTION)
    );
    Ok((target.query(runner, db, &sql).await?)
        .into_iter()
        .filter_map(|row| match <[String; 2]>::try_from(row) {
            Ok([slot, table]) => Some((slot, table)),
            Err(_) => None,
        })
        .collect())
}

/// Starts `db`'s copy afresh, so that [`super::target::subscribe`] makes a new subscription:
/// the subscription disabled, its tables emptied (the new side serves nobody before the
/// cut-over), the subscription dropped, and on the old primary the slots it made. Each step may
/// be interrupted and taken up again: until the subscription is gone, its stalled table finds
/// it again, and a slot left behind is dropped before a new subscription takes its name.
pub async fn restart_copy(
    runner: &impl Runner,
    source: &Server,
    target: &Server,
    db: &Database,
) -> Result<(), Error> {
    let ours = format!(
        "SELECT s.oid, c.system_identifier, \
         (SELECT string_agg(r.srrelid::regclass::text, ', ') \
          FROM pg_subscription_rel r WHERE r.srsubid = s.oid) \
         FROM pg_subscription s CROSS JOIN pg_control_system() c \
         WHERE s.subname = {} \
         AND s.subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
        literal(SUBSCRIPTION)
    );
    let rows = target.query(runner, &db.name, &ours).await?;
    let Some([oid, system, tables]) = rows
        .into_iter()
        .next()
        .and_then(|r| <[String; 3]>::try_from(r).ok())
    else {
        return drop_slots(runner, source, db, None).await;
    };
    let mut steps = vec![format!("ALTER SUBSCRIPTION {SUBSCRIPTION} DISABLE")];
    if !tables.is_empty() {
        // Every table of the database is the subscription's (`FOR ALL TABLES`).
        steps.push(format!("TRUNCATE {tables} CASCADE"));
    }
    steps.push(format!(
        "ALTER SUBSCRIPTION {SUBSCRIPTION} SET (slot_name = NONE)"
    ));
    steps.push(format!("DROP SUBSCRIPTION {SUBSCRIPTION}"));
    for sql in steps {
        target.query(runner, &db.name, &sql).await?;
    }
    drop_slots(runner, source, db, Some((&oid, &system))).await
}

/// Drops on the old primary `db`'s subscription slot and, given the dropped subscription's OID
/// and the new side's system identifier, the table synchronisation slots it made. A slot
/// still in use (its walsender not yet gone after the subscription's workers) is waited for.
pub async fn drop_slots(
    runner: &impl Runner,
    source: &Server,
    db: &Database,
    subscription: Option<(&str, &str)>,
) -> Result<(), Error> {
    let mut which = format!("slot_name = {}", literal(&slot_name(db.oid)));
    if let Some((oid, system)) = subscription {
        if !(digits(oid) && digits(system)) {
            return Err(Error::State(format!(
                "subscription {oid:?} of system {system:?}"
            )));
        }
        which = format!("({which} OR slot_name ~ '^pg_{oid}_sync_[0-9]+_{system}$')");
    }
    let drop = format!(
        "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots \
         WHERE {which} AND NOT active"
    );
    let left = format!("SELECT slot_name FROM pg_replication_slots WHERE {which}");
    for _ in 0..SLOT_RELEASE_POLLS {
        source.query(runner, &db.name, &drop).await?;
        let remaining = first_column(source.query(runner, &db.name, &left).await?);
        if remaining.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(SLOT_RELEASE_POLL).await;
    }
    Err(Error::State(format!(
        "the old primary's slots of {} stayed in use",
        db.name
    )))
}

/// How long a walsender may take to let its slot go after its subscriber's worker stopped.
const SLOT_RELEASE_POLL: Duration = Duration::from_millis(200);
const SLOT_RELEASE_POLLS: u32 = 150;

fn digits(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit())
}

fn first_column(rows: Vec<Vec<String>>) -> BTreeSet<String> {
    (rows.into_iter())
        .filter_map(|row| row.into_iter().next())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_digits_name_a_subscription_or_a_system() {
        assert!(digits("16686") && digits("7438201947"));
        for refused in ["", "16x", "1' OR true --"] {
            assert!(!digits(refused), "{refused:?}");
        }
    }
}
