//! The mechanism of an online upgrade between two real PostgreSQL servers (both 15 here: the
//! host has one major; logical replication between majors is the same protocol): the old
//! primary published, the roles and schema copied, every database subscribed while a writer
//! keeps writing, then the cut-over — read-only, the final position confirmed, sequences
//! carried, subscriptions detached — and every acknowledged row on the new side.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use tusk_instance::error::Error;
use tusk_instance::upgrade::{Direct, Server, conninfo_value, slot_name, source, target};

/// The superuser's way to `cluster`'s primary over verified TLS.
fn server(cluster: &mut Cluster) -> Server {
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

fn primary_with(settings: &str) -> Cluster {
    let mut cluster = Cluster::with_settings(&["demo-0"], settings);
    cluster.set_lease("demo-0", true);
    let primary = cluster.member("demo-0");
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(90));
    cluster
}

fn count(member: &Instance, db: &str, sql: &str) -> i64 {
    let out = member
        .psql_as("postgres", SUPERUSER_PASSWORD, db, sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{sql}: {out:?}"))
}

#[test]
fn an_online_copy_carries_every_acknowledged_row_roles_and_sequences() {
    let mut old = primary_with("wal_level = logical\n");
    let mut new = primary_with("");
    let (from, to) = (server(&mut old), server(&mut new));
    let scratch = tempfile::tempdir().expect("scratch");
    {
        let primary = old.member("demo-0");
        let sql = |db: &str, sql: &str| {
            primary
                .psql_as("postgres", SUPERUSER_PASSWORD, db, sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
        };
        sql("postgres", "CREATE ROLE shopper LOGIN PASSWORD 'shop-pw'");
        sql("postgres", "CREATE DATABASE \"shop|2\" OWNER shopper");
        sql(
            "shop|2",
            "SET ROLE shopper;
             CREATE TABLE orders (id bigserial PRIMARY KEY, note text NOT NULL);
             CREATE TABLE lines (o bigint REFERENCES orders, n int, PRIMARY KEY (o, n));
             INSERT INTO orders (note) SELECT 'before ' || g FROM generate_series(1, 500) g;
             INSERT INTO lines SELECT id, 1 FROM orders;",
        );
        sql(
            "appdb",
            "CREATE TABLE notes (id int PRIMARY KEY); INSERT INTO notes VALUES (1)",
        );
    }

    // A writer through the whole copy: each id it prints was acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let port = old.member("demo-0").port;
        std::thread::spawn(move || {
            let mut acknowledged = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match psql_on(
                    port,
                    "shopper",
                    "shop-pw",
                    "shop|2",
                    "INSERT INTO orders (note) VALUES ('during') RETURNING id",
                ) {
                    Ok(id) => acknowledged.push(id.trim().parse::<i64>().expect("an id")),
                    Err(e) if e.contains("read-only") => break,
                    Err(_) => {}
                }
            }
            acknowledged
        })
    };

    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let started = Instant::now();
    let databases = runtime.block_on(async {
        let databases = source::databases(&Direct, &from).await?;
        source::publish(&Direct, &from, &databases).await?;
        target::copy_roles(&Direct, &from, &to, scratch.path()).await?;
        for db in &databases {
            target::copy_schema(&Direct, &from, &to, db, scratch.path()).await?;
            target::subscribe(&Direct, &from, &from, &to, db).await?;
        }
        Ok::<_, Error>(databases)
    });
    let databases = databases.unwrap_or_else(|e| panic!("the copy: {e}"));
    let names: Vec<&str> = databases.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["appdb", "postgres", "shop|2"]);
    wait_for("every table copied", Duration::from_secs(120), || {
        databases.iter().all(|db| {
            let (done, all) = runtime
                .block_on(target::progress(&Direct, &to, &db.name))
                .unwrap_or((0, 1));
            done == all
        })
    });
    let copied = started.elapsed();

    // The cut-over.
    let gap = Instant::now();
    let lsn = runtime
        .block_on(source::freeze(&Direct, &from))
        .unwrap_or_else(|e| panic!("freeze: {e}"));
    let refused = old.member("demo-0").psql_as(
        "shopper",
        "shop-pw",
        "shop|2",
        "INSERT INTO orders (note) VALUES ('after')",
    );
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("read-only")),
        "a write after the freeze: {refused:?}"
    );
    let slots: Vec<String> = databases.iter().map(|d| slot_name(d.oid)).collect();
    wait_for(
        "the new side to confirm the final position",
        Duration::from_secs(60),
        || {
            runtime
                .block_on(source::confirmed(&Direct, &from, &slots, &lsn))
                .unwrap_or(false)
        },
    );
    let carried = runtime.block_on(async {
        let mut carried = 0;
        for db in &databases {
            carried += target::carry_sequences(&Direct, &from, &to, &db.name).await?;
            target::finish(&Direct, &to, &db.name).await?;
        }
        Ok::<_, Error>(carried)
    });
    let carried = carried.unwrap_or_else(|e| panic!("the cut-over: {e}"));
    let gap = gap.elapsed();
    stop.store(true, Ordering::Relaxed);
    let acknowledged = writer.join().expect("the writer");
    println!(
        "copied in {:.1}s; cut-over {:.2}s; {} rows written during the copy; {carried} sequence(s)",
        copied.as_secs_f64(),
        gap.as_secs_f64(),
        acknowledged.len()
    );
    assert!(!acknowledged.is_empty(), "the writer wrote during the copy");
    assert_eq!(carried, 1, "orders_id_seq");

    let new_primary = new.member("demo-0");
    let on_new = |sql: &str| count(new_primary, "shop|2", sql);
    assert_eq!(
        on_new("SELECT count(*) FROM orders"),
        500 + acknowledged.len() as i64
    );
    let last = acknowledged.iter().max().copied().unwrap_or_default();
    assert_eq!(
        on_new(&format!(
            "SELECT count(*) FROM orders WHERE id IN ({})",
            join(&acknowledged)
        )),
        acknowledged.len() as i64,
        "every acknowledged row"
    );
    assert_eq!(on_new("SELECT count(*) FROM lines"), 500);
    assert_eq!(count(new_primary, "appdb", "SELECT count(*) FROM notes"), 1);
    // The role came with its password's verifier, and the sequence continues after the last id.
    let next = new_primary
        .psql_as(
            "shopper",
            "shop-pw",
            "shop|2",
            "INSERT INTO orders (note) VALUES ('on new') RETURNING id",
        )
        .expect("the copied role writes on the new side");
    assert!(
        next.trim().parse::<i64>().expect("an id") > last,
        "{next} after {last}"
    );
    assert_eq!(
        count(
            new_primary,
            "shop|2",
            "SELECT count(*) FROM pg_subscription"
        ),
        0,
        "detached"
    );

    // What the old side keeps (its publications, the detached slots) is removed, and read-only
    // undone: as a cancelled upgrade leaves it.
    runtime
        .block_on(async {
            source::unpublish(&Direct, &from, &databases, None).await?;
            source::thaw(&Direct, &from).await
        })
        .unwrap_or_else(|e| panic!("unpublish: {e}"));
    let old_primary = old.member("demo-0");
    let slots = count(
        old_primary,
        "postgres",
        "SELECT count(*) FROM pg_replication_slots",
    );
    assert_eq!(slots, 0, "no slot keeps WAL on the old side");
    let publications = count(old_primary, "shop|2", "SELECT count(*) FROM pg_publication");
    assert_eq!(publications, 0);
    wait_for(
        "the old side to accept writes again",
        Duration::from_secs(10),
        || {
            old_primary
                .psql_as(
                    "shopper",
                    "shop-pw",
                    "shop|2",
                    "INSERT INTO orders (note) VALUES ('thawed')",
                )
                .is_ok()
        },
    );
}

fn join(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}
