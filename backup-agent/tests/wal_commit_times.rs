//! The newest commit a real segment holds, read from its records (`backup_store::wal_records`),
//! is the commit time PostgreSQL itself recorded: what a restore to a time is admitted on
//! (a recovery to a time stops only at a commit after it).

mod common;

use backup_store::wal_records::segment_times;
use common::postgres::PgServer;

#[test]
fn the_newest_commit_read_from_a_real_segment_is_the_servers_own() {
    let pg = PgServer::start();
    // The server's own record of each commit time; no autovacuum commit after the test's.
    for setting in ["track_commit_timestamp = on", "autovacuum = off"] {
        pg.psql("postgres", &format!("ALTER SYSTEM SET {setting}"));
    }
    pg.restart();
    pg.psql("postgres", "CREATE TABLE t (n int, pad text)");
    // 20 commits of 40 rows of ~300 bytes: ~800 heap records over ~30 pages, many across one.
    for batch in 0..20 {
        pg.psql(
            "postgres",
            &format!(
                "INSERT INTO t SELECT {batch} * 40 + g, repeat('x', 300) FROM \
                 generate_series(1, 40) g"
            ),
        );
    }
    let newest: i64 = pg
        .psql(
            "postgres",
            "SELECT (extract(epoch FROM max(pg_xact_commit_timestamp(xmin))) * 1000000)::bigint \
             FROM t",
        )
        .parse()
        .expect("a commit time");
    let file = pg.psql("postgres", "SELECT pg_walfile_name(pg_switch_wal())");
    let segment = std::fs::read(pg.dir.path().join("data/pg_wal").join(&file)).expect("segment");
    let times = segment_times(&segment);
    assert_eq!(
        times.newest_commit.map(|t| t.as_microsecond()),
        Some(newest),
        "{file}: {times:?}"
    );
    assert!(
        times.records > 800,
        "{file}: only {} records read",
        times.records
    );
}
