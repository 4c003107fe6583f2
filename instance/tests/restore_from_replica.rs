//! A point-in-time restore as a user runs it on a cluster with replicas: the base backup read
//! from the replica (the operator's default when there is one), the target time written as
//! the README and samples write it (RFC 3339 with `Z`). Found on real pods: PostgreSQL refused
//! `…Z` at start (the restore retried forever), and a replica's base backup carries its
//! `standby.signal` and upstream, so recovery ran in standby mode toward the *source's* primary
//! and, once promoted, left `recovery.signal` behind: the next start crash-looped on "must
//! specify restore_command when standby mode is not enabled".

mod common;

use std::time::Duration;

use common::bucket::{Bucket, archive_through_managers};
use common::restore::{agent_in, base_backup_from, restoring_member};
use common::*;

const NEW_PASSWORD: &str = "the restored cluster's own";

#[test]
fn a_replicas_base_backup_restores_to_an_rfc3339_time_and_serves_after_a_restart() {
    let bucket = Bucket::start();
    let mut source = Cluster::with_settings(&["demo-0", "demo-1"], "archive_timeout = 2s\n");
    archive_through_managers(&mut source, &bucket);
    start_streaming(&mut source);
    let (primary, replica) = (&source.members[0], &source.members[1]);
    let sql = |what: &str, sql: &str| primary.psql(sql).unwrap_or_else(|e| panic!("{what}: {e}"));
    sql(
        "first rows",
        "CREATE TABLE ledger (id int PRIMARY KEY); INSERT INTO ledger SELECT generate_series(1, 100)",
    );
    let count = "SELECT count(*) FROM ledger";
    wait_for_value(replica, count, "100", Duration::from_secs(30));
    let agent = agent_in(source.dir.path());
    base_backup_from(&agent, &source, 1, &bucket, "base1");
    sql(
        "rows after the backup",
        "INSERT INTO ledger SELECT generate_series(101, 250)",
    );
    // As a user writes it: RFC 3339 in UTC with Z.
    let target = sql(
        "the target",
        r#"SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"#,
    );
    assert!(target.ends_with('Z'), "{target}");
    sql(
        "rows after the target",
        "INSERT INTO ledger SELECT generate_series(251, 300)",
    );
    let last = sql("switch", "SELECT pg_walfile_name(pg_switch_wal())");
    wait_for("the last segment archived", Duration::from_secs(60), || {
        bucket
            .keys("tests/demo/wal/")
            .iter()
            .any(|k| k.ends_with(&format!("{last}.zst")))
    });

    let target_var = ("TUSK_RESTORE_TARGET_TIME", target.as_str());
    let mut restored = restoring_member(&bucket, "latest", Some(target_var), NEW_PASSWORD);
    let ledger = "SELECT count(*) || ' ' || max(id) FROM ledger";
    let member = &restored.members[0];
    member.wait_ready_as("primary", Duration::from_secs(180));
    let rows = member.psql_as("postgres", NEW_PASSWORD, "postgres", ledger);
    assert_eq!(
        rows.as_deref(),
        Ok("250 250"),
        "every row before the target, none after"
    );

    let pgdata = member.pgdata.clone();
    let auto_conf = std::fs::read_to_string(pgdata.join("postgresql.auto.conf")).unwrap();
    for key in ["primary_conninfo", "primary_slot_name", "restore_command"] {
        assert!(
            !auto_conf.contains(key),
            "the restored cluster keeps nothing of the source's standby or the recovery: \
             {key} in\n{auto_conf}"
        );
    }
    for signal in ["standby.signal", "recovery.signal"] {
        assert!(!pgdata.join(signal).exists(), "{signal} left behind");
    }

    // The crash loop came at the next start: a restart in place must serve again, as primary.
    let member = restored.member("restored-0");
    member.stop();
    member.start();
    member.wait_ready_as("primary", Duration::from_secs(90));
    let rows = member.psql_as("postgres", NEW_PASSWORD, "postgres", ledger);
    assert_eq!(
        rows.as_deref(),
        Ok("250 250"),
        "the same rows after the restart"
    );
    drop(source);
}
