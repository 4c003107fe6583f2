//! A server archiving through the agent (`wal-push` as its archive_command), as the WAL tests
//! set one up.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::agent::{agent, run_ok};
use super::postgres::PgServer;
use super::stores::TestStore;
use super::wait_until;

/// A script running the agent with the store's settings, as the server's user can: the agent
/// binary is copied beside it (the build directory may be closed to that user).
pub fn agent_script(pg: &PgServer, store: &TestStore, command: &str) -> PathBuf {
    let bin = pg.dir.path().join("backup-agent");
    std::fs::copy(env!("CARGO_BIN_EXE_backup-agent"), &bin).expect("copy the agent");
    let mut script =
        String::from("#!/bin/sh\nexport TUSK_NAMESPACE=tests TUSK_CLUSTER=db TUSK_PATH=nightly\n");
    for (key, value) in store.agent_env() {
        script.push_str(&format!("export {key}='{value}'\n"));
    }
    script.push_str(&format!("exec {} {command} \"$@\"\n", bin.display()));
    let path = pg
        .dir
        .path()
        .join(format!("{}.sh", command.replace(' ', "-")));
    std::fs::write(&path, script).expect("write the script");
    let chmod = Command::new("chmod")
        .arg("755")
        .arg(&path)
        .arg(&bin)
        .status();
    assert!(chmod.expect("chmod").success());
    pg.give_to_server(&path);
    pg.give_to_server(&bin);
    path
}

/// Waits until the server has archived `segment` and never failed to archive.
pub async fn archived(pg: &PgServer, segment: &str) {
    let query = "SELECT coalesce(last_archived_wal, '') || ' ' || failed_count \
                 FROM pg_stat_archiver";
    wait_until(
        &format!("{segment} archived"),
        Duration::from_secs(60),
        || async {
            let state = pg.psql("postgres", query);
            assert!(state.ends_with(" 0"), "archiving failed: {state}");
            state.split(' ').next().is_some_and(|last| last >= segment)
        },
    )
    .await;
}

/// Switches to a new segment; returns the name of the one it closed.
pub fn switch(pg: &PgServer) -> String {
    pg.psql("postgres", "SELECT pg_walfile_name(pg_switch_wal())")
}

/// `base-restore` of backup `id` (of cluster `db`) into `<dir>/restored`; returns the data
/// directory and the agent's summary.
pub fn base_restored(
    store: &TestStore,
    dir: &std::path::Path,
    id: &str,
) -> (PathBuf, serde_json::Value) {
    let pgdata = dir.join("restored");
    let mut restore = agent(store, "db", None);
    restore
        .args(["base-restore", "--backup-id", id, "--pgdata"])
        .arg(&pgdata);
    let summary = run_ok(restore);
    (pgdata, summary)
}

/// A server recovering `pgdata` from `store`'s archive (`wal-fetch`, as `source`'s user runs
/// it) with `target` (recovery_target_* lines; empty: the end of the archive), once promoted.
pub async fn recovered(
    store: &TestStore,
    source: &PgServer,
    pgdata: &std::path::Path,
    target: &str,
) -> PgServer {
    let fetch = agent_script(source, store, "wal-fetch");
    let settings = format!(
        "archive_mode = 'off'\nrestore_command = '{} %f %p'\n{target}",
        fetch.display()
    );
    let server = PgServer::start_recovering(pgdata, &settings);
    wait_until("recovery done", Duration::from_secs(120), || async {
        server.psql("postgres", "SELECT pg_is_in_recovery()") == "f"
    })
    .await;
    server
}

/// A server archiving into `store` through the agent (`wal-push` as its archive_command).
pub fn archiving_server(store: &TestStore) -> PgServer {
    let server = PgServer::start();
    let push = agent_script(&server, store, "wal-push");
    server.psql("postgres", "ALTER SYSTEM SET archive_mode = 'on'");
    server.psql(
        "postgres",
        &format!("ALTER SYSTEM SET archive_command = '{} %p'", push.display()),
    );
    server.restart();
    server
}
