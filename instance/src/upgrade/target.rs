//! The new side's primary in an online upgrade: the old primary's roles and schema copied, a
//! subscription per database that copies the rows and keeps them current, and at the cut-over
//! the sequences carried and the subscriptions detached. The programs are the new major's:
//! `pg_dump` and `pg_dumpall` read every older server.

use std::collections::BTreeSet;
use std::path::Path;

use super::source::single;
use super::{Database, PUBLICATION, Runner, SUBSCRIPTION, Server, ident, literal, slot_name};
use crate::error::Error;

/// The old primary's roles (attributes, password verifiers, memberships) onto the new side.
/// Roles the new side has already (its bootstrap made the superuser and the roles Tusk
/// manages) are altered rather than created; tablespaces are not carried.
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

/// `dump` without the `CREATE ROLE` of a role in `existing` (its `ALTER ROLE` stays).
fn without_existing_roles(dump: &str, existing: &BTreeSet<String>) -> String {
    dump.lines()
        .filter(|line| {
            let role = line
                .strip_prefix("CREATE ROLE ")
                .and_then(|rest| rest.strip_suffix(';'))
                .map(unquote);
            role.is_none_or(|role| !existing.contains(&role))
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

fn unquote(ident: &str) -> String {
    match ident.strip_prefix('"').and_then(|i| i.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => ident.to_owned(),
    }
}

/// `db`'s schema onto the new side (the database created first, with its owner), unless its
/// subscription exists there already (the schema came before it).
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
    } else if subscribed(runner, target, &db.name).await? {
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
    target.run_file(runner, &db.name, &dump).await
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
/// follows. Kept when it exists.
pub async fn subscribe(
    runner: &impl Runner,
    source: &Server,
    target: &Server,
    db: &Database,
) -> Result<(), Error> {
    if subscribed(runner, target, &db.name).await? {
        return Ok(());
    }
    let create = format!(
        "CREATE SUBSCRIPTION {SUBSCRIPTION} CONNECTION {} PUBLICATION {PUBLICATION} \
         WITH (slot_name = {}, copy_data = true)",
        literal(&source.to(&db.name)),
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
/// its slot stays there, with the old instances that are retired.
pub async fn finish(runner: &impl Runner, target: &Server, db: &str) -> Result<(), Error> {
    if !subscribed(runner, target, db).await? {
        return Ok(());
    }
    for sql in [
        format!("ALTER SUBSCRIPTION {SUBSCRIPTION} DISABLE"),
        format!("ALTER SUBSCRIPTION {SUBSCRIPTION} SET (slot_name = NONE)"),
        format!("DROP SUBSCRIPTION {SUBSCRIPTION}"),
    ] {
        target.query(runner, db, &sql).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_the_new_side_has_are_altered_not_created() {
        let dump = "SET default_transaction_read_only = off;\n\
                    CREATE ROLE postgres;\n\
                    ALTER ROLE postgres WITH SUPERUSER;\n\
                    CREATE ROLE \"Report\"\"ers\";\n\
                    CREATE ROLE shop;\n\
                    ALTER ROLE shop WITH LOGIN;\n";
        let existing = BTreeSet::from(["postgres".to_owned(), "Report\"ers".to_owned()]);
        let kept = without_existing_roles(dump, &existing);
        assert_eq!(
            kept,
            "SET default_transaction_read_only = off;\n\
             ALTER ROLE postgres WITH SUPERUSER;\n\
             CREATE ROLE shop;\n\
             ALTER ROLE shop WITH LOGIN;\n"
        );
    }
}
