//! The old primary's side of an online upgrade: its databases published, and at the cut-over
//! made read-only, its final position read, and its slots watched until the new side confirms
//! it. Run with a superuser's connection (the old primary's own manager) or, for the reads, the
//! upgrade role's.

use super::{Database, PUBLICATION, Runner, Server, Session, literal};
use crate::error::Error;

/// Every database that accepts connections, templates excepted, by name.
pub async fn databases(runner: &impl Runner, server: &Server) -> Result<Vec<Database>, Error> {
    let rows = server
        .query(
            runner,
            "postgres",
            "SELECT datname, oid, pg_get_userbyid(datdba) FROM pg_database \
             WHERE datallowconn AND NOT datistemplate ORDER BY 1",
        )
        .await?;
    rows.into_iter()
        .map(|row| match row.as_slice() {
            [name, oid, owner] => Ok(Database {
                name: name.clone(),
                oid: oid
                    .parse()
                    .map_err(|_| Error::State(format!("database {name}: OID {oid:?}")))?,
                owner: owner.clone(),
            }),
            _ => Err(Error::State(format!("pg_database row {row:?}"))),
        })
        .collect()
}

/// A publication of every table in each of `databases` (kept when it exists). Logical decoding
/// needs `wal_level = logical`: refused otherwise, before anything is created.
pub async fn publish(
    runner: &impl Runner,
    server: &Server,
    databases: &[Database],
) -> Result<(), Error> {
    let level = single(server.query(runner, "postgres", "SHOW wal_level").await?);
    if level != "logical" {
        return Err(Error::State(format!(
            "wal_level is {level}: an online upgrade needs logical (a restart)"
        )));
    }
    for db in databases {
        let exists = format!(
            "SELECT count(*) FROM pg_publication WHERE pubname = {}",
            literal(PUBLICATION)
        );
        if single(server.query(runner, &db.name, &exists).await?) == "0" {
            let create = format!("CREATE PUBLICATION {PUBLICATION} FOR ALL TABLES");
            server.query(runner, &db.name, &create).await?;
        }
    }
    Ok(())
}

/// Makes the server read-only for every new transaction, ends every client session (a session
/// that began before keeps its own default), and returns the WAL position after which nothing
/// more can be written by a client that did not override the default: what the new side must
/// confirm before it takes over. The write gap starts here.
pub async fn freeze(runner: &impl Runner, server: &Server) -> Result<String, Error> {
    let sql = |s: &'static str| server.query(runner, "postgres", s);
    sql("ALTER SYSTEM SET default_transaction_read_only = on").await?;
    sql("SELECT pg_reload_conf()").await?;
    // The postmaster re-reads its configuration asynchronously: a session it forks before then
    // would still default to writing. Each psql run is a new session.
    for _ in 0..100 {
        let probe = "SHOW default_transaction_read_only";
        let seen = server.query_as(runner, "postgres", probe, Session::Client);
        if single(seen.await?) == "on" {
            sql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            )
            .await?;
            return Ok(single(sql("SELECT pg_current_wal_insert_lsn()").await?));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Err(Error::State(
        "the server did not turn read-only after a reload".into(),
    ))
}

/// Undoes [`freeze`]: an upgrade cancelled before its cut-over leaves the server as it was.
pub async fn thaw(runner: &impl Runner, server: &Server) -> Result<(), Error> {
    let sql = |s: &'static str| server.query(runner, "postgres", s);
    sql("ALTER SYSTEM RESET default_transaction_read_only").await?;
    sql("SELECT pg_reload_conf()").await.map(drop)
}

/// Whether every slot in `slots` has been confirmed by its subscriber up to `lsn`.
pub async fn confirmed(
    runner: &impl Runner,
    server: &Server,
    slots: &[String],
    lsn: &str,
) -> Result<bool, Error> {
    Ok(behind(runner, server, slots, lsn).await?.is_empty())
}

/// The slots of `slots` not yet confirmed past `lsn` (a missing one too).
pub async fn behind(
    runner: &impl Runner,
    server: &Server,
    slots: &[String],
    lsn: &str,
) -> Result<Vec<String>, Error> {
    let names: Vec<String> = slots.iter().map(|s| literal(s)).collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT slot_name FROM pg_replication_slots WHERE slot_name IN ({}) \
         AND confirmed_flush_lsn >= {}::pg_lsn",
        names.join(", "),
        literal(lsn)
    );
    let past: Vec<String> = (server.query(runner, "postgres", &sql).await?)
        .into_iter()
        .filter_map(|row| row.into_iter().next())
        .collect();
    Ok(slots
        .iter()
        .filter(|s| !past.contains(s))
        .cloned()
        .collect())
}

/// The sequences of `database` that have been used, as (qualified name, last value).
pub async fn sequences(
    runner: &impl Runner,
    server: &Server,
    database: &str,
) -> Result<Vec<(String, String)>, Error> {
    let rows = server
        .query(
            runner,
            database,
            "SELECT format('%I.%I', schemaname, sequencename), last_value FROM pg_sequences \
             WHERE last_value IS NOT NULL ORDER BY 1",
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| match row.as_slice() {
            [name, value] => Some((name.clone(), value.clone())),
            _ => None,
        })
        .collect())
}

/// Removes what [`publish`] made and the slots the subscriptions left (an inactive slot keeps
/// WAL for ever): a cancelled upgrade leaves nothing behind. `subscriber`, the new side's
/// system identifier, names the table synchronisation slots its subscriptions made, which a
/// copy cancelled mid-way leaves too; a slot of any other subscriber is never touched. Returns
/// the slots still in use (a subscriber still connected), which are left.
pub async fn unpublish(
    runner: &impl Runner,
    server: &Server,
    databases: &[Database],
    subscriber: Option<&str>,
) -> Result<Vec<String>, Error> {
    for db in databases {
        let drop = format!("DROP PUBLICATION IF EXISTS {PUBLICATION}");
        server.query(runner, &db.name, &drop).await?;
    }
    let ours = ours(subscriber)?;
    let drop = format!(
        "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots \
         WHERE {ours} AND NOT active"
    );
    server.query(runner, "postgres", &drop).await?;
    let left = format!("SELECT slot_name FROM pg_replication_slots WHERE {ours} ORDER BY 1");
    Ok((server.query(runner, "postgres", &left).await?)
        .into_iter()
        .filter_map(|row| row.into_iter().next())
        .collect())
}

/// The condition on `pg_replication_slots` naming the upgrade's slots: its own
/// (`tusk_upgrade_<database oid>`) and, given the subscriber's system identifier (digits
/// only, or refused), the table synchronisation slots its subscriptions name after it.
fn ours(subscriber: Option<&str>) -> Result<String, Error> {
    let own = "slot_name LIKE 'tusk\\_upgrade\\_%'".to_owned();
    let Some(system) = subscriber else {
        return Ok(own);
    };
    if system.is_empty() || !system.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::State(format!(
            "{system:?} is not a system identifier"
        )));
    }
    Ok(format!(
        "({own} OR slot_name ~ '^pg_[0-9]+_sync_[0-9]+_{system}$')"
    ))
}

/// The one value of a one-row, one-column answer ("" when there is none).
pub(super) fn single(rows: Vec<Vec<String>>) -> String {
    rows.into_iter()
        .next()
        .and_then(|row| row.into_iter().next())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synchronisation_slots_are_named_by_the_subscribers_system_identifier_only() {
        assert_eq!(
            ours(None).ok(),
            Some("slot_name LIKE 'tusk\\_upgrade\\_%'".into())
        );
        let named = ours(Some("7438201947")).unwrap_or_default();
        assert!(
            named.ends_with("'^pg_[0-9]+_sync_[0-9]+_7438201947$')"),
            "{named}"
        );
        for refused in ["", "74x", "1' OR true --"] {
            assert!(ours(Some(refused)).is_err(), "{refused:?}");
        }
    }
}
