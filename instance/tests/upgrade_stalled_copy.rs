//! A table whose synchronisation lost its slot on the old primary (the new primary killed just
//! as the table's copy ended, seen once on real pods: a copy stuck at 41 of 42 tables) fails the
//! copy with the table named, and the copy asked again starts the database afresh: every row
//! of the old side once, and no slot of the stalled subscription left on the old primary.
//!
//! The crash's end state is made by hand, since its window is a few instructions wide: the
//! table put back to "copied, not ended" (`f`) after its slot is gone. Its worker then fails on
//! the missing origin, before it would ask for the slot (origin names `pg_*` are the server's
//! own, so the test cannot make it): the same state to the manager, which reads the table's
//! state and the old side's slots.

mod common;

use std::time::Duration;

use common::upgrade::*;
use common::*;
use tusk_contract::upgrade_target::{COPY_PATH, CopyState};

fn count(member: &Instance, sql_text: &str) -> i64 {
    let out = sql(member, "appdb", sql_text);
    out.parse()
        .unwrap_or_else(|_| panic!("{sql_text}: {out:?}"))
}

#[test]
fn a_table_stalled_without_its_slot_fails_the_copy_and_the_database_is_copied_afresh() {
    let (mut old, mut new) = copy_sides_with(
        "CREATE TABLE items (id bigserial PRIMARY KEY, note text);
         CREATE TABLE notes (id int PRIMARY KEY);
         INSERT INTO items (note) SELECT 'before' FROM generate_series(1, 1000);
         INSERT INTO notes SELECT generate_series(1, 10);",
    );
    let (request, body) = publish_for_copy(old.member("demo-0"));
    let target = new.member("demo-0");
    let (code, answer) = http_post(target.status_port, COPY_PATH, &body);
    assert_eq!(code, 202, "{answer}");
    wait_for("every table copied", Duration::from_secs(120), || {
        progress(target).synchronized()
    });

    // The crash's end state: `items` copied but not ended, its slot gone.
    sql(target, "appdb", "ALTER SUBSCRIPTION tusk_upgrade DISABLE");
    wait_for(
        "the subscription's workers to stop",
        Duration::from_secs(30),
        || {
            count(
                target,
                "SELECT count(*) FROM pg_stat_subscription WHERE pid IS NOT NULL \
             AND subid = (SELECT oid FROM pg_subscription WHERE subdbid = \
             (SELECT oid FROM pg_database WHERE datname = current_database()))",
            ) == 0
        },
    );
    sql(
        target,
        "appdb",
        "UPDATE pg_subscription_rel SET srsubstate = 'f', srsublsn = NULL \
         WHERE srrelid = 'items'::regclass;
         ALTER SUBSCRIPTION tusk_upgrade ENABLE;",
    );
    let primary = old.member("demo-0");
    sql(
        primary,
        "appdb",
        "INSERT INTO items (note) SELECT 'while stalled' FROM generate_series(1, 200)",
    );
    let target = new.member("demo-0");
    wait_for(
        "the table's worker to fail",
        Duration::from_secs(60),
        || {
            count(
                target,
                "SELECT coalesce(sum(sync_error_count), 0) FROM pg_stat_subscription_stats",
            ) > 0
        },
    );

    // Named, and the copy failed so that the operator asks again.
    wait_for("the copy to fail", Duration::from_secs(30), || {
        progress(target).state == CopyState::Failed
    });
    let failed = progress(target);
    let message = failed.message.clone().unwrap_or_default();
    assert!(
        message.contains("items") && message.contains("appdb") && message.contains("slot"),
        "{failed:?}"
    );
    let (code, answer) = http_post(target.status_port, COPY_PATH, &body);
    assert_eq!(code, 202, "{answer}");
    wait_for("every table copied again", Duration::from_secs(120), || {
        progress(target).synchronized()
    });

    let primary = old.member("demo-0");
    sql(
        primary,
        "appdb",
        "INSERT INTO items (note) VALUES ('after')",
    );
    let target = new.member("demo-0");
    wait_for(
        "the last row on the new side",
        Duration::from_secs(60),
        || count(target, "SELECT count(*) FROM items") == 1201,
    );
    assert_eq!(
        sql(
            target,
            "appdb",
            "SELECT count(DISTINCT id), count(*) FILTER (WHERE note = 'while stalled') \
             FROM items UNION ALL SELECT count(*), 0 FROM notes"
        ),
        "1201|200\n10|0",
    );
    let primary = old.member("demo-0");
    assert_eq!(
        sql(
            primary,
            "postgres",
            "SELECT count(*) FILTER (WHERE slot_name LIKE 'pg\\_%'), \
             count(*) FILTER (WHERE slot_name LIKE 'tusk\\_upgrade\\_%' AND active) \
             FROM pg_replication_slots"
        ),
        format!("0|{}", request.databases.len()),
        "no table synchronisation slot left; one subscription slot per database, in use"
    );
}

/// An attempt interrupted between creating its subscription slot on the old primary and
/// recording its subscription (the new side's data lost, or its subscription dropped) leaves
/// `tusk_upgrade_<oid>` behind, which would refuse the next attempt's subscription its name:
/// the copy drops it first, and copies every row.
#[test]
fn a_subscription_slot_left_by_an_interrupted_attempt_is_dropped_before_subscribing() {
    let (mut old, mut new) = copy_sides_with(
        "CREATE TABLE items (id int PRIMARY KEY);
         INSERT INTO items SELECT generate_series(1, 500);",
    );
    let primary = old.member("demo-0");
    let (request, body) = publish_for_copy(primary);
    let appdb = (request.databases.iter())
        .find(|db| db.name == "appdb")
        .expect("appdb published");
    let leftover = format!(
        "SELECT slot_name FROM pg_create_logical_replication_slot('{}', 'pgoutput')",
        appdb.slot
    );
    assert_eq!(sql(primary, "appdb", &leftover), appdb.slot);

    let target = new.member("demo-0");
    let (code, answer) = http_post(target.status_port, COPY_PATH, &body);
    assert_eq!(code, 202, "{answer}");
    wait_for("every table copied", Duration::from_secs(120), || {
        progress(target).synchronized()
    });
    let primary = old.member("demo-0");
    sql(primary, "appdb", "INSERT INTO items VALUES (501)");
    let target = new.member("demo-0");
    wait_for(
        "the row written after the copy",
        Duration::from_secs(60),
        || count(target, "SELECT count(*) FROM items") == 501,
    );
    // A subscription's walsender can be between connections for a moment after its tables'
    // synchronisation ends: waited for, not read once.
    let primary = old.member("demo-0");
    let slots = "SELECT count(*), count(*) FILTER (WHERE active) FROM pg_replication_slots \
                 WHERE slot_name LIKE 'tusk\\_upgrade\\_%'";
    let every = format!("{0}|{0}", request.databases.len());
    wait_for(
        "one subscription slot per database, each in use by the new subscription",
        Duration::from_secs(30),
        || sql(primary, "postgres", slots) == every,
    );
}
