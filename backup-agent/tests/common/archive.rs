//! A server archiving through the agent (`wal-push` as its archive_command), as the WAL tests
//! set one up.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

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
