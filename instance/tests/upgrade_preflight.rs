//! `GET /upgrade/preflight` against a real PostgreSQL: every table logical replication cannot
//! carry is named, in every database, and a clean database is not refused.

mod common;

use common::*;
use tusk_contract::upgrade::UpgradePreflight;

#[test]
fn the_preflight_names_what_logical_replication_cannot_carry_in_every_database() {
    let mut cluster = single_primary();
    let primary = cluster.member("demo-0");
    primary
        .psql("CREATE DATABASE shop")
        .expect("the second database");
    let shop = |sql: &str| {
        primary
            .psql_as("postgres", SUPERUSER_PASSWORD, "shop", sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    shop(
        "CREATE TABLE keyed (id int PRIMARY KEY);
         CREATE TABLE events (at timestamptz, what text);
         CREATE TABLE full_row (v text);
         ALTER TABLE full_row REPLICA IDENTITY FULL;
         CREATE TABLE nothing (id int PRIMARY KEY);
         ALTER TABLE nothing REPLICA IDENTITY NOTHING;
         CREATE TABLE by_index (v int NOT NULL);
         CREATE UNIQUE INDEX by_index_v ON by_index (v);
         ALTER TABLE by_index REPLICA IDENTITY USING INDEX by_index_v;
         CREATE SCHEMA \"Sales\";
         CREATE TABLE \"Sales\".\"Log\" (line text);
         CREATE TABLE parted (at date) PARTITION BY RANGE (at);
         CREATE TABLE parted_2026 PARTITION OF parted FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
         CREATE UNLOGGED TABLE cache (k text PRIMARY KEY);
         SELECT lo_create(0);",
    );
    let port = primary.status_port;
    let body = http_get(port, "/upgrade/preflight").expect("the preflight answers");
    let preflight: UpgradePreflight = serde_json::from_str(&body).expect(&body);
    let names: Vec<&str> = preflight
        .databases
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["appdb", "postgres", "shop"],
        "the bootstrapped one, postgres, the new one; templates are not listed"
    );
    for clean in &preflight.databases[..2] {
        assert!(
            clean.without_replica_identity.is_empty() && clean.unlogged.is_empty(),
            "{clean:?}"
        );
    }
    let listed = &preflight.databases[2];
    assert_eq!(
        listed.without_replica_identity,
        [
            "\"Sales\".\"Log\"",
            "public.events",
            "public.nothing",
            "public.parted",
            "public.parted_2026"
        ],
        "a key, an index identity or the full row carry; a mixed-case name is quoted"
    );
    assert_eq!(listed.unlogged, ["public.cache"]);
    assert_eq!(listed.large_objects, 1);
    let refusals = preflight.refusals();
    assert_eq!(refusals.len(), 3, "{refusals:?}");
    assert!(refusals[0].starts_with("database shop: "), "{refusals:?}");
    // The harness's server runs with `wal_level = replica` unless told otherwise.
    assert_eq!(
        preflight.needs_logical_wal(),
        preflight.wal_level != "logical"
    );

    // Fixed as the refusal says: nothing is refused any more.
    shop(
        "ALTER TABLE events ADD PRIMARY KEY (at);
          ALTER TABLE nothing REPLICA IDENTITY DEFAULT;
          ALTER TABLE \"Sales\".\"Log\" REPLICA IDENTITY FULL;
          ALTER TABLE parted ADD PRIMARY KEY (at);
          ALTER TABLE cache SET LOGGED;
          SELECT lo_unlink(oid) FROM pg_largeobject_metadata;",
    );
    let body = http_get(port, "/upgrade/preflight").expect("the preflight answers");
    let preflight: UpgradePreflight = serde_json::from_str(&body).expect(&body);
    assert_eq!(preflight.refusals(), Vec::<String>::new(), "{body}");
}
