//! The new side's primary in an online upgrade: the old primary's roles and schema copied, a
//! subscription per database that copies the rows and keeps them current, and at the cut-over
//! the sequences carried and the subscriptions detached. The programs are the new major's:
//! `pg_dump` and `pg_dumpall` read every older server.

use std::collections::BTreeSet;
use std::path::Path;

use tusk_contract::roles::UPGRADE_USER;

use super::source::single;
use super::source_access;
use super::{
    Database, PUBLICATION, Runner, SUBSCRIPTION, Server, ident, literal, slot_name, stalled,
};
use crate::error::Error;

/// The old primary's roles (attributes, password verifiers, memberships) onto the new side.
/// Roles the new side has already are altered rather than created, except the superuser and
/// Tusk's own roles (`tusk_*`), which the new side's bootstrap made from the cluster's Secrets
/// and are left as they are; tablespaces are not carried.
pub async fn copy_roles(
    runner: &impl Runner,
    source: &Server,
    target: &Server,
    scratch: &Path,
) -> Result<(), Error> {
    let dump = scratch.join("roles.sql");
    let mut cmd = target.program("pg_dumpall");
    cmd.args(["--globals-only", "--no-tablespaces", "-d"])
        .arg(source.to("postgres"))
        .arg("-f")
        .arg(&dump);
    runner.run(cmd, "pg_dumpall").await?;
    let existing: BTreeSet<String> = target
        .query(runner, "postgres", "SELECT rolname FROM pg_roles")
        .await?
        .into_iter()
        .filter_map(|row| row.into_iter().next())
        .collect();
    let text = std::fs::read_to_string(&dump).map_err(Error::io("reading the roles' dump"))?;
    let kept = without_existing_roles(&text, &existing);
    std::fs::write(&dump, kept).map_err(Error::io("writing the roles' dump"))?;
    target.run_file(runner, "postgres", &dump).await
}

/// `dump` without the `CREATE ROLE` of a role in `existing` (its `ALTER ROLE` stays) and
/// without any `CREATE`/`ALTER ROLE` of, or membership granted to, a role the new side manages
/// itself (the upgrade role is the old side's alone).
fn without_existing_roles(dump: &str, existing: &BTreeSet<String>) -> String {
    dump.lines()
        .filter(|line| {
            if let Some(role) = subject(line, "CREATE ROLE ") {
                return !existing.contains(&role) && !managed(&role);
            }
            if let Some(role) = subject(line, "ALTER ROLE ") {
                return !managed(&role);
            }
            grantee(line).is_none_or(|role| !managed(&role))
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The role a `CREATE ROLE` or `ALTER ROLE` line of pg_dumpall is about.
fn subject(line: &str, statement: &str) -> Option<String> {
    let rest = line.strip_prefix(statement)?;
    let (ident, _) = match rest.strip_prefix('"') {
        // A quoted name ends at a quote not doubled.
        Some(quoted) => {
            let mut name = String::new();
            let mut chars = quoted.chars().peekable();
            while let Some(c) = chars.next() {
                match (c, chars.peek()) {
                    ('"', Some('"')) => {
                        chars.next();
                        name.push('"');
                    }
                    ('"', _) => return Some(name),
                    _ => name.push(c),
                }
            }
            return None;
        }
        None => rest.split_once([' ', ';'])?,
    };
    Some(ident.to_owned())
}

/// The role a membership line of pg_dumpall (`GRANT a TO b …;`) grants to.
fn grantee(line: &str) -> Option<String> {
    let rest = line.strip_prefix("GRANT ")?;
    let (_, to) = rest.split_once(" TO ")?;
    subject(to, "")
}

/// The superuser and Tusk's own roles: made by the new side's bootstrap from the cluster's
/// Secrets, never taken from the old side.
fn managed(role: &str) -> bool {
    role == "postgres" || role.starts_with("tusk_")
}

/// `db`'s schema onto the new side (the database created first, with its owner), unless its
/// subscription exists there already or the schema was restored before. The restore is one
/// transaction, so a failed one leaves nothing and runs again.
pub async fn copy_schema(
    runner: &impl Runner,
    source: &Server,
    target: &Server,
    db: &Database,
    scratch: &Path,
) -> Result<(), Error> {
    let exists = format!(
        "SELECT count(*) FROM pg_database WHERE datname = {}",
        literal(&db.name)
    );
    if single(target.query(runner, "postgres", &exists).await?) == "0" {
        let create = format!(
            "CREATE DATABASE {} OWNER {}",
            ident(&db.name),
            ident(&db.owner)
        );
        target.query(runner, "postgres", &create).await?;
    } else if subscribed(runner, target, &db.name).await? || copied(runner, target, db).await? {
        return Ok(());
    }
    let dump = scratch.join(format!("schema-{}.sql", db.oid));
    let mut cmd = target.program("pg_dump");
    cmd.args([
        "--schema-only",
        "--no-publications",
        "--no-subscriptions",
        "-d",
    ])
    .arg(source.to(&db.name))
    .arg("-f")
    .arg(&dump);
    runner.run(cmd, "pg_dump").await?;
    let schema = std::fs::read_to_string(&dump).map_err(Error::io(format!("reading {dump:?}")))?;
    // The old side's guard against schema changes came along: its triggers are not the new
    // side's, and go in the same transaction.
    let restore = without_upgrade_grants(&schema) + &source_access::drop_triggers();
    std::fs::write(&dump, restore).map_err(Error::io(format!("writing {dump:?}")))?;
    target.run_file(runner, &db.name, &dump).await
}

/// Whether `db`'s schema was restored here: the guard's schema came with it, in one transaction.
async fn copied(runner: &impl Runner, target: &Server, db: &Database) -> Result<bool, Error> {
    let sql = format!(
        "SELECT count(*) FROM pg_namespace WHERE nspname = {}",
        literal(source_access::GUARD_SCHEMA)
    );
    Ok(single(target.query(runner, &db.name, &sql).await?) != "0")
}

/// `schema` without the grants to the upgrade role: pg_dump carries the changed privileges of
/// system catalogs too (its `SELECT` on `pg_authid`), and the role is the old side's alone.
fn without_upgrade_grants(schema: &str) -> String {
    let to_upgrade_role = format!(" TO {UPGRADE_USER};");
    schema
        .lines()
        .filter(|line| !(line.starts_with("GRANT ") && line.ends_with(&to_upgrade_role)))
        .map(|line| format!("{line}\n"))
        .collect()
}

async fn subscribed(runner: &impl Runner, target: &Server, db: &str) -> Result<bool, Error> {
    let sql = format!(
        "SELECT count(*) FROM pg_subscription s JOIN pg_database d ON d.oid = s.subdbid \
         WHERE s.subname = {} AND d.datname = current_database()",
        literal(SUBSCRIPTION)
    );
    Ok(single(target.query(runner, db, &sql).await?) != "0")
}

/// A subscription in `db` to the old primary's publication: it copies every table, then
/// follows. Kept when it exists, unless a table's synchronisation has stalled for good
/// ([`stalled`]): then the database's copy starts afresh. `source` is the old primary as this
/// process reaches it (its slots are looked at and dropped through it), `publisher` as the new
/// side's server does (the subscription's connection): the same for the manager, which runs
/// beside the new server; a test on the host reaches the old pod another way.
pub async fn subscribe(
    runner: &impl Runner,
    source: &Server,
    publisher: &Server,
    target: &Server,
    db: &Database,
) -> Result<(), Error> {
    if subscribed(runner, target, &db.name).await? {
        let tables = stalled::stalled(runner, source, target, &db.name).await?;
        if tables.is_empty() {
            return Ok(());
        }
        tracing::warn!(
            database = %db.name,
            tables = %tables.join(", "),
            "a table's synchronisation lost its slot on the old primary: copying the database afresh"
        );
        stalled::restart_copy(runner, source, target, db).await?;
    } else {
        // A slot an interrupted attempt left would refuse the new subscription its name.
        stalled::drop_slots(runner, source, db, None).await?;
    }
    let create = format!(
        "CREATE SUBSCRIPTION {SUBSCRIPTION} CONNECTION {} PUBLICATION {PUBLICATION} \
         WITH (slot_name = {}, copy_data = true)",
        literal(&publisher.to(&db.name)),
        literal(&slot_name(db.oid))
    );
    target.query(runner, &db.name, &create).await.map(drop)
}

/// Tables of `db`'s subscription whose copy has finished, and all of them.
pub async fn progress(
    runner: &impl Runner,
    target: &Server,
    db: &str,
) -> Result<(u64, u64), Error> {
    let rows = target
        .query(
            runner,
            db,
            "SELECT count(*) FILTER (WHERE srsubstate IN ('r', 's')), count(*) \
             FROM pg_subscription_rel",
        )
        .await?;
    match rows.first().map(Vec::as_slice) {
        Some([done, all]) => Ok((done.parse().unwrap_or(0), all.parse().unwrap_or(0))),
        _ => Err(Error::State(format!(
            "subscription progress of {db}: {rows:?}"
        ))),
    }
}

/// Sets each of `db`'s sequences on the new side to its old value: logical replication does
/// not carry them.
pub async fn carry_sequences(
    runner: &impl Runner,
    source: &Server,
    target: &Server,
    db: &str,
) -> Result<usize, Error> {
    let sequences = super::source::sequences(runner, source, db).await?;
    if sequences.is_empty() {
        return Ok(0);
    }
    let calls: Vec<String> = sequences
        .iter()
        .map(|(name, value)| format!("setval({}::regclass, {value}, true)", literal(name)))
        .collect();
    let sql = format!("SELECT {}", calls.join(", "));
    target.query(runner, db, &sql).await?;
    Ok(sequences.len())
}

/// Detaches and drops `db`'s subscription without reaching the old primary (fenced by then):
/// its slot stays there, with the old instances that are retired. The schema copy's mark goes
/// too.
pub async fn finish(runner: &impl Runner, target: &Server, db: &str) -> Result<(), Error> {
    if !subscribed(runner, target, db).await? {
        return source_access::unguard(runner, target, db).await;
    }
    for sql in [
        format!("ALTER SUBSCRIPTION {SUBSCRIPTION} DISABLE"),
        format!("ALTER SUBSCRIPTION {SUBSCRIPTION} SET (slot_name = NONE)"),
        format!("DROP SUBSCRIPTION {SUBSCRIPTION}"),
    ] {
        target.query(runner, db, &sql).await?;
    }
    source_access::unguard(runner, target, db).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upgrade_roles_grants_stay_on_the_old_side() {
        let schema = "CREATE TABLE public.t (id integer);\n\
                      GRANT SELECT ON TABLE pg_catalog.pg_authid TO tusk_upgrade;\n\
                      GRANT SELECT ON TABLE public.t TO reader;\n";
        assert_eq!(
            without_upgrade_grants(schema),
            "CREATE TABLE public.t (id integer);\n\
             GRANT SELECT ON TABLE public.t TO reader;\n"
        );
    }

    #[test]
    fn roles_the_new_side_has_are_altered_not_created() {
        let dump = "SET default_transaction_read_only = off;\n\
                    CREATE ROLE postgres;\n\
                    ALTER ROLE postgres WITH SUPERUSER PASSWORD 'old';\n\
                    CREATE ROLE tusk_replication;\n\
                    ALTER ROLE tusk_replication WITH REPLICATION PASSWORD 'old';\n\
                    CREATE ROLE \"Report\"\"ers\";\n\
                    ALTER ROLE \"Report\"\"ers\" WITH LOGIN;\n\
                    CREATE ROLE shop;\n\
                    ALTER ROLE shop WITH LOGIN;\n\
                    GRANT pg_monitor TO tusk_monitoring GRANTED BY postgres;\n\
                    GRANT pg_read_all_data TO tusk_upgrade GRANTED BY postgres;\n\
                    GRANT shop TO \"Report\"\"ers\" GRANTED BY postgres;\n";
        let existing = BTreeSet::from([
            "postgres".to_owned(),
            "tusk_replication".to_owned(),
            "Report\"ers".to_owned(),
        ]);
        let kept = without_existing_roles(dump, &existing);
        assert_eq!(
            kept,
            "SET default_transaction_read_only = off;\n\
             ALTER ROLE \"Report\"\"ers\" WITH LOGIN;\n\
             CREATE ROLE shop;\n\
             ALTER ROLE shop WITH LOGIN;\n\
             GRANT shop TO \"Report\"\"ers\" GRANTED BY postgres;\n"
        );
        assert_eq!(
            grantee("GRANT pg_read_all_data TO tusk_upgrade WITH INHERIT TRUE GRANTED BY x;"),
            Some("tusk_upgrade".into())
        );
        assert_eq!(
            subject("ALTER ROLE x SET a = 1;", "ALTER ROLE "),
            Some("x".into())
        );
        assert_eq!(
            subject("CREATE ROLE \"a b\";", "CREATE ROLE "),
            Some("a b".into())
        );
    }
}
