//! The old primary's steps of an online upgrade as its manager serves them (`POST /upgrade/…`,
//! `tusk_contract::upgrade_source`): only the Lease's primary answers; publishing makes the
//! certificate-only upgrade role, the publications and the guard against schema changes; the
//! new side copies roles, schema and rows through that role alone; freeze and the confirmation
//! end the copy, and unpublish and thaw leave the old primary with nothing of the upgrade.

mod common;

use std::time::Duration;

use common::*;
use tusk_contract::upgrade_source::{
    CONFIRMED_PATH, Confirmation, DDL_REFUSED, FREEZE_PATH, Frozen, PUBLISH_PATH, Published,
    THAW_PATH, UNPUBLISH_PATH,
};
use tusk_instance::error::Error;
use tusk_instance::upgrade::{Direct, Server, conninfo_value, target};

/// `cluster`'s demo-0 as `tusk_upgrade` reaches it: its certificate alone.
fn as_upgrade_role(cluster: &Cluster, port: u16) -> Server {
    let tls = cluster.dir.path().join("tls");
    let file = |name: &str| conninfo_value(&tls.join(name).display().to_string());
    Server {
        conninfo: format!(
            "host=127.0.0.1 port={port} user=tusk_upgrade sslmode=verify-ca sslrootcert={} \
             sslcert={} sslkey={}",
            file("ca.crt"),
            file("upgrade.crt"),
            file("upgrade.key")
        ),
        bin_dir: Some(pg_bin_dir()),
    }
}

fn superuser(cluster: &mut Cluster) -> Server {
    let ca = cluster.dir.path().join("tls").join("ca.crt");
    let port = cluster.member("demo-0").port;
    Server {
        conninfo: format!(
            "host=127.0.0.1 port={port} user=postgres password={} sslmode=verify-ca \
             sslrootcert={}",
            conninfo_value(SUPERUSER_PASSWORD),
            conninfo_value(&ca.display().to_string())
        ),
        bin_dir: Some(pg_bin_dir()),
    }
}

fn sql(member: &Instance, db: &str, sql: &str) -> String {
    member
        .psql_as("postgres", SUPERUSER_PASSWORD, db, sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .trim()
        .to_owned()
}

fn post<T: serde::de::DeserializeOwned>(member: &Instance, path: &str, body: &str) -> T {
    let (code, answer) = http_post(member.status_port, path, body);
    assert_eq!(code, 200, "{path}: {answer}");
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{path}: {e}: {answer}"))
}

#[test]
fn the_old_primarys_steps_publish_guard_freeze_confirm_and_leave_nothing_behind() {
    let mut old = streaming_pair_with("wal_level = logical\n");
    let mut new = single_primary();
    let old_port = old.member("demo-0").port;
    let (from, to) = (as_upgrade_role(&old, old_port), superuser(&mut new));
    {
        let primary = old.member("demo-0");
        sql(
            primary,
            "postgres",
            "CREATE ROLE shopper LOGIN PASSWORD 'shop-pw'",
        );
        sql(
            primary,
            "appdb",
            "GRANT CREATE ON SCHEMA public TO shopper;
             SET ROLE shopper;
             CREATE TABLE items (id bigserial PRIMARY KEY, note text);
             INSERT INTO items (note) SELECT 'before' FROM generate_series(1, 100);",
        );
    }

    // Only the Lease's primary takes the steps, and only with the token.
    let (code, _) = http_post(old.member("demo-1").status_port, PUBLISH_PATH, "");
    assert_eq!(code, 409, "a replica refuses");
    let denied = std::process::Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .arg(format!(
            "https://127.0.0.1:{}{PUBLISH_PATH}",
            old.member("demo-0").status_port
        ))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&denied.stdout), "401");

    let primary = old.member("demo-0");
    let published: Published = post(primary, PUBLISH_PATH, "");
    let again: Published = post(primary, PUBLISH_PATH, "");
    assert_eq!(published, again, "publishing twice changes nothing");
    let names: Vec<&str> = (published.databases.iter())
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["appdb", "postgres"]);
    assert!(
        (published.databases.iter()).all(|d| d.slot == format!("tusk_upgrade_{}", d.oid)),
        "{published:?}"
    );

    // Schema changes are refused while the copy runs; an application's temporary tables and
    // its writes are not.
    let app = |statement: &str| primary.psql_as("shopper", "shop-pw", "appdb", statement);
    let refused = app("ALTER TABLE items ADD COLUMN extra int");
    assert!(
        refused.as_ref().is_err_and(|e| e.contains(DDL_REFUSED)),
        "{refused:?}"
    );
    let refused = app("CREATE TABLE other (id int PRIMARY KEY)");
    assert!(refused.is_err(), "a new table: {refused:?}");
    let refused = app("DROP TABLE items");
    assert!(
        refused.as_ref().is_err_and(|e| e.contains(DDL_REFUSED)),
        "{refused:?}"
    );
    app(
        "CREATE TEMP TABLE scratch (id serial PRIMARY KEY); DROP TABLE scratch; \
         INSERT INTO items (note) VALUES ('during')",
    )
    .unwrap_or_else(|e| panic!("temporary tables and writes: {e}"));

    // The new side copies through the upgrade role alone (its certificate, no password).
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let scratch = tempfile::tempdir().expect("scratch");
    let databases: Vec<_> = (published.databases.iter())
        .map(|d| tusk_instance::upgrade::Database {
            name: d.name.clone(),
            oid: d.oid,
            owner: d.owner.clone(),
        })
        .collect();
    runtime
        .block_on(async {
            target::copy_roles(&Direct, &from, &to, scratch.path()).await?;
            for db in &databases {
                target::copy_schema(&Direct, &from, &to, db, scratch.path()).await?;
                target::subscribe(&Direct, &from, &from, &to, db).await?;
            }
            Ok::<_, Error>(())
        })
        .unwrap_or_else(|e| panic!("the copy as tusk_upgrade: {e}"));
    wait_for("every table copied", Duration::from_secs(120), || {
        databases.iter().all(|db| {
            let (done, all) = runtime
                .block_on(target::progress(&Direct, &to, &db.name))
                .unwrap_or((0, 1));
            done == all
        })
    });
    let new_primary = new.member("demo-0");
    assert_eq!(
        sql(
            new_primary,
            "appdb",
            "SELECT count(*) FROM pg_event_trigger"
        ),
        "0",
        "the guard stays on the old side"
    );
    let primary = old.member("demo-0");
    sql(primary, "appdb", "INSERT INTO items (note) VALUES ('last')");

    // The cut-over: frozen, and confirmed once the new side has the last write.
    let frozen: Frozen = post(primary, FREEZE_PATH, "");
    let request = format!(r#"{{"lsn": "{}"}}"#, frozen.lsn);
    wait_for("the new side to confirm", Duration::from_secs(60), || {
        post::<Confirmation>(primary, CONFIRMED_PATH, &request).confirmed()
    });
    let (code, _) = http_post(primary.status_port, CONFIRMED_PATH, r#"{"lsn": "0/1; --"}"#);
    assert_ne!(code, 200, "only a WAL position is taken");
    runtime
        .block_on(async {
            for db in &databases {
                target::carry_sequences(&Direct, &from, &to, &db.name).await?;
                target::finish(&Direct, &to, &db.name).await?;
            }
            Ok::<_, Error>(())
        })
        .unwrap_or_else(|e| panic!("the cut-over: {e}"));
    let new_primary = new.member("demo-0");
    assert_eq!(
        sql(new_primary, "appdb", "SELECT count(*) FROM items"),
        "102"
    );
    let id = new_primary
        .psql_as(
            "shopper",
            "shop-pw",
            "appdb",
            "INSERT INTO items (note) VALUES ('on the new side') RETURNING id",
        )
        .unwrap_or_else(|e| panic!("the role's old password on the new side: {e}"));
    assert_eq!(id.trim(), "103", "the sequence continues");

    // Nothing of the upgrade stays on the old side, and it writes again once thawed.
    let primary = old.member("demo-0");
    // What a copy cancelled mid-way leaves: a table synchronisation slot of the new side
    // (named after its system identifier), beside one of another subscriber.
    let theirs = "pg_99_sync_16384_7000000000000000002";
    for slot in ["pg_99_sync_16384_7000000000000000001", theirs] {
        sql(
            primary,
            "appdb",
            &format!("SELECT 1 FROM pg_create_logical_replication_slot('{slot}', 'pgoutput')"),
        );
    }
    let _: () = post(
        primary,
        UNPUBLISH_PATH,
        r#"{"subscriber":"7000000000000000001"}"#,
    );
    let _: () = post(primary, UNPUBLISH_PATH, "");
    assert_eq!(
        sql(
            primary,
            "postgres",
            "SELECT string_agg(slot_name, ',') FROM pg_replication_slots WHERE slot_name LIKE 'pg\\_%'"
        ),
        theirs,
        "the new side's synchronisation slot dropped, another subscriber's kept"
    );
    sql(
        primary,
        "postgres",
        &format!("SELECT pg_drop_replication_slot('{theirs}')"),
    );
    let _: () = post(primary, THAW_PATH, "");
    for (db, check) in [
        (
            "postgres",
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'tusk\\_upgrade\\_%'",
        ),
        (
            "postgres",
            "SELECT count(*) FROM pg_roles WHERE rolname = 'tusk_upgrade'",
        ),
        ("appdb", "SELECT count(*) FROM pg_publication"),
        ("appdb", "SELECT count(*) FROM pg_event_trigger"),
        (
            "appdb",
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'tusk_upgrade'",
        ),
    ] {
        assert_eq!(sql(primary, db, check), "0", "{check}");
    }
    wait_for(
        "the old side to write again",
        Duration::from_secs(10),
        || {
            primary
                .psql_as(
                    "shopper",
                    "shop-pw",
                    "appdb",
                    "ALTER TABLE items ADD COLUMN later int",
                )
                .is_ok()
        },
    );
}
