//! A point-in-time restore by the instance manager (issue 27) on real servers and a real MinIO:
//! a new cluster's first holder, given a base backup and a target time instead of nothing to
//! initdb, unpacks the backup, recovers through `tusk-instance wal-fetch` (the manager runs the
//! backup agent with the source's credentials; PostgreSQL never sees them), promotes at the
//! target, takes this cluster's passwords, and serves: every row committed before the target
//! is there, none after, and the table dropped after it exists. The same exactness for a
//! transaction id, a WAL position and a named restore point; a missing or damaged segment stops
//! the recovery, named, with nothing promoted. A cluster re-created under the same name archives
//! beside the old system, and either restores. A restore to a time after a failover crosses the
//! timeline switch (the history file) from a base backup of the old timeline.

mod common;

use std::time::Duration;

use backup_store::store::ObjectStore;
use common::bucket::{Bucket, archiving_pair};
use common::restore::{
    a_system_that_lived_and_died, agent_in, archiving_primary, base_backup, restoring_member,
};
use common::*;
use tusk_testkit::minio;

/// A new cluster restoring the newest base backup of `tests/demo` that can reach `target`
/// (`latest`: `base1`, since `base2` completed after it).
fn restoring(bucket: &Bucket, target: &str) -> Cluster {
    let target = ("TUSK_RESTORE_TARGET_TIME", target);
    restoring_member(bucket, "latest", Some(target), NEW_PASSWORD)
}

/// A source cluster's history in the bucket: a base backup after 100 rows, 150 more rows in
/// one transaction (`xid`, ending at `lsn`) in their own segment (`middle`), the target time and
/// the restore point `after-250`, 50 rows after them, a second base backup, then the table dropped.
struct History {
    source: Cluster,
    target: String,
    system: String,
    middle: String,
    xid: String,
    lsn: String,
}

fn key_of(system: &str, segment: &str) -> String {
    format!("tests/demo/wal/{system}/00000001/{segment}.zst")
}

fn archived_history(bucket: &Bucket) -> History {
    let source = archiving_primary(bucket);
    let primary = &source.members[0];
    let agent = agent_in(source.dir.path());
    let sql = |what: &str, sql: &str| primary.psql(sql).unwrap_or_else(|e| panic!("{what}: {e}"));
    sql(
        "first rows",
        "CREATE TABLE ledger (id int PRIMARY KEY); INSERT INTO ledger SELECT generate_series(1, 100)",
    );
    base_backup(&agent, &source, bucket, "base1");
    sql("a fresh segment", "SELECT pg_switch_wal()");
    // One statement string is one transaction: its id is the rows' xid.
    let xid = sql(
        "rows after the backup",
        "INSERT INTO ledger SELECT generate_series(101, 250); SELECT txid_current()",
    );
    let lsn = sql("the position after them", "SELECT pg_current_wal_lsn()");
    let middle = sql(
        "the middle segment",
        "SELECT pg_walfile_name(pg_switch_wal())",
    );
    let target = sql("the target", "SELECT clock_timestamp()");
    sql(
        "a named restore point",
        "SELECT pg_create_restore_point('after-250')",
    );
    sql(
        "rows after the target",
        "INSERT INTO ledger SELECT generate_series(251, 300)",
    );
    // A newer base backup, after the target: a restore to the target must not start from it.
    base_backup(&agent, &source, bucket, "base2");
    sql("the mistake", "DROP TABLE ledger");
    let system = sql(
        "system identifier",
        "SELECT system_identifier FROM pg_control_system()",
    );
    let last = sql("switch", "SELECT pg_walfile_name(pg_switch_wal())");
    let key = key_of(&system, &last);
    wait_for("the last segment archived", Duration::from_secs(60), || {
        bucket.keys("tests/demo/wal/").contains(&key)
    });
    History {
        source,
        target,
        system,
        middle,
        xid,
        lsn,
    }
}

const NEW_PASSWORD: &str = "the new cluster's own";

/// Once the restored member serves: its ledger's row count and highest id, read with the new
/// cluster's own superuser password.
fn restored_ledger(restored: &Cluster) -> Result<String, String> {
    let member = &restored.members[0];
    member.wait_ready_as("primary", Duration::from_secs(180));
    let sql = "SELECT count(*) || ' ' || max(id) FROM ledger";
    member.psql_as("postgres", NEW_PASSWORD, "postgres", sql)
}

/// The manager's log once it says the recovery stopped short of promoting.
fn stopped_log(member: &Instance) -> String {
    wait_for("the restore to stop", Duration::from_secs(120), || {
        std::fs::read_to_string(&member.log)
            .unwrap_or_default()
            .contains("the recovery stopped")
    });
    std::fs::read_to_string(&member.log).unwrap_or_default()
}

#[test]
fn a_new_cluster_restores_a_base_backup_to_a_point_in_time() {
    let bucket = Bucket::start();
    let history = archived_history(&bucket);
    let restored = restoring(&bucket, &history.target);
    let member = &restored.members[0];
    member.wait_ready_as("primary", Duration::from_secs(180));
    let sql = |sql: &str| member.psql_as("postgres", NEW_PASSWORD, "postgres", sql);
    let rows = sql("SELECT count(*) || ' ' || max(id) FROM ledger")
        .expect("the restored table, with this cluster's superuser password");
    assert_eq!(rows, "250 250", "every row before the target, none after");
    let restored_system = sql("SELECT system_identifier FROM pg_control_system()");
    assert_eq!(
        restored_system.as_deref(),
        Ok(history.system.as_str()),
        "the same database system, restored"
    );
    assert!(
        member.psql(";").is_err(),
        "the source's superuser password no longer logs in"
    );
    let data = &member.pgdata;
    let auto = std::fs::read_to_string(data.join("postgresql.auto.conf")).unwrap_or_default();
    assert!(
        !auto.contains("restore_command") && !auto.contains("recovery_target"),
        "the recovery settings are gone once promoted: {auto}"
    );
    assert!(!data.with_file_name("data.tusk-restore-pending").exists());
    let log = std::fs::read_to_string(&member.log).unwrap_or_default();
    assert!(
        !log.contains(minio::SECRET_KEY),
        "the source's secret is never logged"
    );
}

#[test]
fn without_a_target_the_restore_replays_to_the_end_of_the_archive() {
    let bucket = Bucket::start();
    let history = archived_history(&bucket);
    // The source lives on after the mistake; the archive ends where its last switch left it.
    let primary = &history.source.members[0];
    primary
        .psql("CREATE TABLE after_the_drop AS SELECT 7 AS lucky")
        .expect("a table after the drop");
    let last = primary
        .psql("SELECT pg_walfile_name(pg_switch_wal())")
        .expect("switch");
    let key = key_of(&history.system, &last);
    wait_for("the last segment archived", Duration::from_secs(60), || {
        bucket.keys("tests/demo/wal/").contains(&key)
    });
    let restored = restoring_member(&bucket, "base1", None, NEW_PASSWORD);
    let member = &restored.members[0];
    member.wait_ready_as("primary", Duration::from_secs(180));
    let sql = |sql: &str| member.psql_as("postgres", NEW_PASSWORD, "postgres", sql);
    assert_eq!(sql("SELECT lucky FROM after_the_drop").as_deref(), Ok("7"));
    assert!(
        sql("SELECT 1 FROM ledger").is_err(),
        "the drop before the end of the archive is replayed too"
    );
}

#[test]
fn a_segment_missing_before_the_target_stops_the_restore_and_nothing_is_promoted() {
    let bucket = Bucket::start();
    let history = archived_history(&bucket);
    let gone = key_of(&history.system, &history.middle);
    bucket
        .runtime
        .block_on(bucket.store.delete_many(std::slice::from_ref(&gone)))
        .expect("delete a segment");
    let restored = restoring(&bucket, &history.target);
    let member = &restored.members[0];
    let log = stopped_log(member);
    assert!(
        log.contains("recovery ended before configured recovery target was reached"),
        "PostgreSQL names why: {log}"
    );
    assert_ne!(member.status_field("role"), "primary");
    // What the operator's Restored condition shows: PostgreSQL's own reason, from /status. The
    // manager reports it once it has read the server's log, which may be after the server
    // stopped: waited for (it was read once, and under load came too early).
    let named = |reported: &serde_json::Value| {
        reported.as_str().is_some_and(|e| {
            e.contains("FATAL:  recovery ended before configured recovery target was reached")
        })
    };
    wait_for(
        "/status to report the restore's error",
        Duration::from_secs(30),
        || named(&member.status_field("restoreError")),
    );
    assert!(
        member
            .pgdata
            .with_file_name("data.tusk-restore-pending")
            .exists(),
        "the restore is still pending, so the data is never started as it is"
    );
    assert!(
        member
            .psql_as("postgres", NEW_PASSWORD, "postgres", ";")
            .is_err(),
        "nothing serves"
    );
}

#[test]
fn a_restore_stops_exactly_at_a_transaction_a_wal_position_or_a_restore_point() {
    let bucket = Bucket::start();
    let history = archived_history(&bucket);
    // base1 by name for an xid and a name (only replay can place them); `latest` for the LSN,
    // which the agent resolves to base1: base2 is consistent only after it.
    for (backup, target) in [
        ("base1", ("TUSK_RESTORE_TARGET_XID", history.xid.as_str())),
        ("latest", ("TUSK_RESTORE_TARGET_LSN", history.lsn.as_str())),
        ("base1", ("TUSK_RESTORE_TARGET_NAME", "after-250")),
    ] {
        let restored = restoring_member(&bucket, backup, Some(target), NEW_PASSWORD);
        let rows = restored_ledger(&restored);
        assert_eq!(
            rows.as_deref(),
            Ok("250 250"),
            "{target:?}: the transaction, nothing after"
        );
    }
}

#[test]
fn a_damaged_segment_stops_the_restore_naming_it() {
    let bucket = Bucket::start();
    let history = archived_history(&bucket);
    let key = key_of(&history.system, &history.middle);
    let store = &bucket.store;
    bucket.runtime.block_on(async {
        let mut bytes = backup_store::store::get_bytes(store, &key)
            .await
            .expect("the archived segment");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x55;
        store
            .put(&key, bytes.into())
            .await
            .expect("the damaged copy");
    });
    let restored = restoring(&bucket, &history.target);
    let member = &restored.members[0];
    let log = stopped_log(member);
    let named = log.lines().any(|l| {
        l.contains("a WAL fetch failed") && l.contains(&history.middle) && l.contains("damaged")
    });
    assert!(named, "the manager names the damaged segment: {log}");
    assert_ne!(member.status_field("role"), "primary");
}

#[test]
fn a_re_created_cluster_archives_beside_the_old_system_and_both_restore() {
    let bucket = Bucket::start();
    let old = a_system_that_lived_and_died(&bucket, "old-base", "old");
    let old_wal = format!("tests/demo/wal/{old}/");
    let before = bucket.keys(&old_wal);
    // The same namespace and name, a new database system: its WAL goes beside, never into.
    let new = a_system_that_lived_and_died(&bucket, "new-base", "new");
    assert_ne!(old, new, "a new system identifier");
    assert_eq!(
        bucket.keys(&old_wal),
        before,
        "the old system's WAL untouched"
    );
    assert!(!bucket.keys(&format!("tests/demo/wal/{new}/")).is_empty());

    // Each base backup replays its own system's archive to its end, and only that.
    for (base, label) in [("old-base", "old"), ("new-base", "new")] {
        let restored = restoring_member(&bucket, base, None, NEW_PASSWORD);
        let member = &restored.members[0];
        member.wait_ready_as("primary", Duration::from_secs(180));
        let rows = member.psql_as(
            "postgres",
            NEW_PASSWORD,
            "postgres",
            "SELECT string_agg(v, ',' ORDER BY v) FROM who",
        );
        assert_eq!(rows, Ok(format!("{label},{label} later")), "{base}");
    }
}

#[test]
fn a_restore_to_a_time_after_a_failover_follows_the_new_timeline() {
    let bucket = Bucket::start();
    let mut cluster = archiving_pair(&bucket);
    let agent = agent_in(cluster.dir.path());
    let sql = |member: &Instance, sql: &str| {
        member
            .psql(sql)
            .unwrap_or_else(|e| panic!("{}: {sql}: {e}", member.name))
    };
    let old = &cluster.members[0];
    sql(
        old,
        "CREATE TABLE ledger (id int PRIMARY KEY); INSERT INTO ledger SELECT generate_series(1, 100)",
    );
    base_backup(&agent, &cluster, &bucket, "base1");
    sql(old, "INSERT INTO ledger SELECT generate_series(101, 200)");
    let count = "SELECT count(*) FROM ledger";
    wait_for_value(&cluster.members[1], count, "200", Duration::from_secs(30));
    fail_over(&mut cluster);

    // On the new primary's timeline: rows, the target, rows after it, every file archived.
    let promoted = &cluster.members[1];
    sql(
        promoted,
        "INSERT INTO ledger SELECT generate_series(201, 300)",
    );
    let target = sql(promoted, "SELECT clock_timestamp()");
    sql(
        promoted,
        "INSERT INTO ledger SELECT generate_series(301, 350)",
    );
    let system = sql(
        promoted,
        "SELECT system_identifier FROM pg_control_system()",
    );
    let last = sql(promoted, "SELECT pg_walfile_name(pg_switch_wal())");
    assert!(last.starts_with("00000002"), "{last}");
    let key = format!("tests/demo/wal/{system}/00000002/{last}.zst");
    wait_for("the new timeline archived", Duration::from_secs(60), || {
        bucket.keys("tests/demo/wal/").contains(&key)
    });

    // From a base backup of timeline 1, across the switch (the history file), to the target.
    let restored = restoring(&bucket, &target);
    let rows = restored_ledger(&restored);
    assert_eq!(
        rows.as_deref(),
        Ok("300 300"),
        "every row before the target"
    );
}
