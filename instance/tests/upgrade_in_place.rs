//! The instance side of an in-place upgrade as the pods run it, at the process level: the old
//! installation copied by `tusk-instance old-installation` and run from the copy, then
//! `tusk-instance upgrade-in-place` on a stopped PGDATA: `--check` changes nothing, a check
//! that fails (a `reg*` column, which pg_upgrade cannot carry) says why and leaves the old
//! directory whole, and the upgrade itself (`pg_upgrade --link`) gives a new system with every
//! row, repeatable after an attempt that stopped half-way. This host has one major, so the
//! upgrade runs 15 → 15 (pg_upgrade allows it); 15 → 17 runs on the real node.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

struct Dirs {
    _tmp: tempfile::TempDir,
    binary: PathBuf,
    old: PathBuf,
    pgdata: PathBuf,
    socket: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().expect("a directory");
    chown(tmp.path());
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // The target directory may be private to root: the manager installs itself, as the init
    // container does.
    let binary = tmp.path().join("tusk-instance");
    let mut install = Command::new(env!("CARGO_BIN_EXE_tusk-instance"));
    install.arg("install").arg(&binary);
    ok(run(install), "install");
    let (old, volume, socket) = (
        tmp.path().join("old"),
        tmp.path().join("volume"),
        tmp.path().join("socket"),
    );
    for dir in [&volume, &socket] {
        std::fs::create_dir(dir).expect("a directory");
        chown(dir);
    }
    Dirs {
        pgdata: volume.join("data"),
        binary,
        _tmp: tmp,
        old,
        socket,
    }
}

/// `program` as `postgres` (the server refuses root), as in the pod.
fn as_postgres(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    if let Some((uid, gid)) = postgres_ids() {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn run(mut cmd: Command) -> Output {
    cmd.output().expect("the command runs")
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn manager(d: &Dirs) -> Command {
    as_postgres(&d.binary)
}

fn upgrade(d: &Dirs, check: bool) -> Output {
    let mut cmd = manager(d);
    cmd.args(["upgrade-in-place", "--old"])
        .arg(&d.old)
        .arg("--pgdata")
        .arg(&d.pgdata)
        .arg("--bin-dir")
        .arg(pg_bin_dir());
    if check {
        cmd.arg("--check");
    }
    run(cmd)
}

fn pg_ctl(d: &Dirs, action: &str) {
    let mut cmd = as_postgres(pg_bin_dir().join("pg_ctl"));
    cmd.arg(action)
        .arg("-D")
        .arg(&d.pgdata)
        .args(["-w", "-m", "fast", "-l"])
        .arg(d.socket.join("server.log"))
        .arg("-o")
        .arg(format!("-c listen_addresses='' -k {}", d.socket.display()));
    ok(run(cmd), &format!("pg_ctl {action}"));
}

fn sql(d: &Dirs, sql: &str) -> String {
    let mut cmd = as_postgres(pg_bin_dir().join("psql"));
    cmd.args(tusk_testkit::PSQL_SCRIPT)
        .arg("-h")
        .arg(&d.socket)
        .args(["-U", "postgres", "-d", "postgres", "-c", sql]);
    ok(run(cmd), sql).trim().to_owned()
}

fn system_identifier(d: &Dirs) -> String {
    let mut cmd = as_postgres(pg_bin_dir().join("pg_controldata"));
    cmd.arg(&d.pgdata);
    let out = ok(run(cmd), "pg_controldata");
    out.lines()
        .find_map(|l| l.strip_prefix("Database system identifier:"))
        .map(|v| v.trim().to_owned())
        .expect("a system identifier")
}

fn siblings(pgdata: &Path) -> Vec<String> {
    let mut left: Vec<String> = std::fs::read_dir(pgdata.parent().expect("a parent"))
        .expect("the volume")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // The data directory's lock (the manager's too) stays, as it does for every manager.
        .filter(|name| !name.ends_with(".tusk-lock"))
        .collect();
    left.sort();
    left
}

#[test]
fn an_in_place_upgrade_checks_refuses_with_the_reason_and_links_repeatably() {
    let d = dirs();
    // The init container's copy, mirrored at its own paths.
    let mut copy = manager(&d);
    copy.arg("old-installation")
        .arg(&d.old)
        .arg("--bin-dir")
        .arg(pg_bin_dir());
    ok(run(copy), "old-installation");
    let copied_bin = d
        .old
        .join(pg_bin_dir().strip_prefix("/").expect("absolute"));
    assert!(
        copied_bin.join("postgres").is_file(),
        "{}",
        copied_bin.display()
    );
    assert!(d.old.join("installation.json").is_file());
    assert!(
        std::fs::read_dir(d.old.join("deps")).expect("deps").count() > 0,
        "no library carried"
    );

    // A database as Tusk's initdb makes it, stopped cleanly.
    let mut initdb = as_postgres(pg_bin_dir().join("initdb"));
    initdb
        .arg("-D")
        .arg(&d.pgdata)
        .args(["--data-checksums", "-U", "postgres", "-E", "UTF8"])
        .args(["--auth-local=peer", "--auth-host=scram-sha-256"]);
    ok(run(initdb), "initdb");
    pg_ctl(&d, "start");
    sql(
        &d,
        "CREATE EXTENSION pg_trgm; CREATE TABLE kept (id int PRIMARY KEY, note text); \
         INSERT INTO kept SELECT g, md5(g::text) FROM generate_series(1, 5000) g; \
         CREATE INDEX kept_note ON kept USING gin (note gin_trgm_ops); \
         CREATE TABLE named (r regproc); INSERT INTO named VALUES ('now')",
    );
    pg_ctl(&d, "stop");
    let before = system_identifier(&d);

    // What pg_upgrade cannot carry is named, and nothing changes.
    let refused = upgrade(&d, true);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!refused.status.success(), "the check passed: {said}");
    assert!(
        said.contains("reg*"),
        "the refusal does not say why: {said}"
    );
    assert_eq!(siblings(&d.pgdata), ["data"], "left beside PGDATA");
    assert_eq!(system_identifier(&d), before);
    pg_ctl(&d, "start");
    sql(&d, "DROP TABLE named");
    pg_ctl(&d, "stop");

    ok(upgrade(&d, true), "upgrade-in-place --check");
    assert_eq!(siblings(&d.pgdata), ["data"], "the check left something");
    assert_eq!(system_identifier(&d), before, "the check changed PGDATA");

    // An attempt that stopped half-way: --link had renamed the old control file, and the new
    // directory was left unfinished.
    std::fs::rename(
        d.pgdata.join("global/pg_control"),
        d.pgdata.join("global/pg_control.old"),
    )
    .expect("the control file renamed");
    std::fs::create_dir(d.pgdata.with_file_name("data.next")).expect("a half-made directory");

    ok(upgrade(&d, false), "upgrade-in-place");
    // Beside PGDATA only the mark asking the manager for statistics (pg_upgrade before 18
    // carries none).
    assert_eq!(
        siblings(&d.pgdata),
        ["data", "data.tusk-analyze"],
        "left beside PGDATA"
    );
    let after = system_identifier(&d);
    assert_ne!(after, before, "the upgraded directory is a new system");
    pg_ctl(&d, "start");
    assert_eq!(sql(&d, "SELECT count(*) FROM kept"), "5000");
    assert_eq!(
        sql(
            &d,
            "SELECT extversion IS NOT NULL FROM pg_extension WHERE extname = 'pg_trgm'"
        ),
        "t"
    );
    pg_ctl(&d, "stop");
}
