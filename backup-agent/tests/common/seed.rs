//! A seeded source database and per-table checksums to compare after a restore.

use super::postgres::PgServer;

/// Tables compared after restore, as (database, table).
pub const TABLES: &[(&str, &str)] = &[
    ("app", "public.customers"),
    ("app", "public.orders"),
    ("app", "billing.invoices"),
    ("reports", "public.daily"),
    ("odd name's db", "public.t"),
];

pub fn seed(pg: &PgServer) {
    pg.psql("postgres", "CREATE ROLE app_owner LOGIN PASSWORD 'app-pw'");
    pg.psql("postgres", "CREATE DATABASE app OWNER app_owner");
    pg.psql("postgres", "CREATE DATABASE reports");
    pg.psql(
        "app",
        "SET ROLE app_owner;
         CREATE TABLE customers (id bigserial PRIMARY KEY, name text NOT NULL, email text UNIQUE,
             created timestamptz NOT NULL DEFAULT '2026-01-01 00:00:00+00', tags text[], profile jsonb);
         CREATE SCHEMA billing;
         CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint REFERENCES customers(id),
             amount numeric(12,2), paid boolean, note text, blob bytea, ref uuid);
         CREATE INDEX orders_customer_idx ON orders (customer_id);
         CREATE TABLE billing.invoices (id int PRIMARY KEY, period daterange, total double precision);
         CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 500;
         INSERT INTO customers (name, email, tags, profile)
             SELECT 'customer ' || i, 'c' || i || '@example.com', ARRAY['t' || (i % 7), 'x'],
                    jsonb_build_object('n', i, 'vip', i % 10 = 0)
             FROM generate_series(1, 2000) i;
         INSERT INTO orders (customer_id, amount, paid, note, blob, ref)
             SELECT 1 + (i % 2000), (i * 7.31) % 1000, i % 3 = 0, repeat('note ', i % 20),
                    decode(md5(i::text), 'hex'), md5(i::text)::uuid
             FROM generate_series(1, 20000) i;
         INSERT INTO billing.invoices
             SELECT i, daterange('2026-01-01'::date + i, '2026-01-01'::date + i + 30), i * 1.5
             FROM generate_series(1, 500) i;",
    );
    // A name that needs quoting everywhere (conninfo, identifiers, object keys).
    pg.psql("postgres", "CREATE DATABASE \"odd name's db\"");
    pg.psql(
        "odd name's db",
        "CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2)",
    );
    pg.psql(
        "reports",
        "CREATE TABLE daily (day date PRIMARY KEY, visits int);
         INSERT INTO daily SELECT '2026-01-01'::date + i, i * 3 FROM generate_series(0, 364) i;",
    );
}

/// md5 over every row of every table in [`TABLES`], in a stable order.
pub fn checksums(pg: &PgServer) -> Vec<(String, String)> {
    TABLES
        .iter()
        .map(|(db, table)| {
            let sum = pg.psql(
                db,
                &format!("SELECT count(*) || ':' || md5(string_agg(t::text, '|' ORDER BY t::text)) FROM {table} t"),
            );
            (format!("{db}.{table}"), sum)
        })
        .collect()
}

/// Database `big` with table `filler(i, payload)` of `rows` rows, `payload` being an SQL
/// expression over `i`: large enough that a dump spans several upload parts.
pub fn big_database(pg: &PgServer, payload: &str, rows: u32) {
    pg.psql("postgres", "CREATE DATABASE big");
    pg.psql(
        "big",
        &format!(
            "CREATE TABLE filler AS SELECT i, {payload} AS payload \
             FROM generate_series(1, {rows}) i"
        ),
    );
}
