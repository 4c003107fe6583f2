//! Real bytes (L4): seeding a database, per-table checksums, and comparing two clusters.

use crate::wait::{Check, until};
use crate::{Ctx, Result, ensure, say};

/// Tables owned by the application role, with awkward values (NULLs, quotes, tabs, non-ASCII),
/// 2,000 customers and 20,000 orders, and a view.
/// What [`SEED`] creates: its tables and their rows.
pub const SEED_TABLES: i64 = 2;
pub const SEED_ROWS: i64 = 2_000 + 20_000;

const SEED: &str = r#"
CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, note text);
INSERT INTO customers SELECT g, 'customer ' || g, CASE WHEN g % 3 = 0 THEN NULL ELSE E'quote '' tab \t ü €' END
  FROM generate_series(1, 2000) g;
CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint REFERENCES customers,
  amount numeric(12, 2), placed_at timestamptz, tags jsonb);
INSERT INTO orders (customer_id, amount, placed_at, tags)
  SELECT 1 + g % 2000, (g * 7 % 10000) / 100.0, timestamptz '2026-01-01 00:00+00' + g * interval '1 minute',
         jsonb_build_object('n', g, 'even', g % 2 = 0)
  FROM generate_series(1, 20000) g;
CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 90;"#;

impl Ctx {
    pub async fn db_sql(&self, cluster: &str, db: &str, sql: &str) -> Result<String> {
        self.platform.db_sql(&self.ns, cluster, db, sql).await
    }

    /// Waits until the database answers (the pod runs; locally, the instance is up).
    pub async fn wait_sql(&self, cluster: &str) -> Result {
        until(
            format!("{}/{cluster} to answer SQL", self.ns),
            self.timeout(),
            || async {
                self.db_sql(cluster, "postgres", "SELECT 1").await?;
                Ok(Check::Done(()))
            },
        )
        .await
    }

    /// Creates the seed tables in `db` as role `owner`.
    pub async fn seed(&self, cluster: &str, db: &str, owner: &str) -> Result {
        self.db_sql(cluster, db, &format!("SET ROLE \"{owner}\";{SEED}"))
            .await?;
        Ok(())
    }

    /// One line per table of schema public: `name|rows|md5 of all rows`.
    pub async fn checksums(&self, cluster: &str, db: &str) -> Result<Vec<String>> {
        let tables = self
            .db_sql(
                cluster,
                db,
                "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
            )
            .await?;
        let mut sums = Vec::new();
        for table in tables.lines().filter(|t| !t.is_empty()) {
            let sql = format!(
                "SELECT '{table}', count(*), md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '')) FROM {table} x"
            );
            sums.push(self.db_sql(cluster, db, &sql).await?.trim().to_string());
        }
        Ok(sums)
    }

    /// Identical tables and per-table checksums in `db` of both clusters, and not empty.
    pub async fn assert_same_data(&self, source: &str, target: &str, db: &str) -> Result {
        let want = self.checksums(source, db).await?;
        let got = self.checksums(target, db).await?;
        let ns = &self.ns;
        ensure!(!want.is_empty(), "no tables in {ns}/{source} database {db}");
        ensure!(
            got == want,
            "restored data differs: {ns}/{target}/{db} has\n{}\nwhile {ns}/{source}/{db} has\n{}",
            got.join("\n"),
            want.join("\n")
        );
        let counts: Vec<String> = want
            .iter()
            .map(|l| {
                l.rsplit_once('|')
                    .map(|(head, _)| head)
                    .unwrap_or(l)
                    .to_string()
            })
            .collect();
        say(format!(
            "{db}: per-table row counts and md5 of {target} equal {source}'s: {}",
            counts.join(" ")
        ));
        Ok(())
    }
}
