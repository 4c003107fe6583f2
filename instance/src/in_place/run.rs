//! `tusk-instance upgrade-in-place`: PGDATA upgraded by `pg_upgrade --link` from the old
//! installation an init container copied (`installation.rs`) to this image's, with the server
//! stopped. `--check` stops after `pg_upgrade --check` and changes nothing.
//!
//! The new data directory is made beside PGDATA (`<pgdata>.next`, the same volume, which
//! `--link` needs) and swapped in only once `pg_upgrade` has finished, marked by a file in it.
//! Every attempt can be repeated: one that stopped before that mark undoes what `--link` did to
//! the old directory (its `global/pg_control` renamed; nothing has started the new server, so
//! the linked files are as they were) and starts over; one that stopped after it only swaps.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::installation::{DEPS, Installation, library_dirs, missing_here};
use crate::error::Error;

/// Written into the new directory once `pg_upgrade` succeeded; removed after the swap.
const UPGRADED: &str = "tusk.upgraded";

/// What one run asks.
pub struct Request<'a> {
    /// Where `old-installation` copied the old major.
    pub old_root: &'a Path,
    /// This image's programs (`pg_config` on PATH when absent).
    pub new_bin: Option<&'a Path>,
    pub pgdata: &'a Path,
    pub check_only: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `pg_upgrade --check` passed; nothing was changed.
    Checked {
        from: u32,
        to: u32,
    },
    Upgraded {
        from: u32,
        to: u32,
    },
    /// PGDATA was upgraded by an earlier run.
    AlreadyUpgraded {
        to: u32,
    },
}

pub fn upgrade(request: &Request) -> Result<Outcome, Error> {
    let old = Installation::read(request.old_root)?;
    let new = Installation::here(request.new_bin)?;
    let pgdata = request.pgdata;
    let next = sibling(pgdata, "next");
    let (from, to) = (old.major, new.major);
    if next.join(UPGRADED).exists() {
        swap(pgdata, &next)?;
        ask_for_statistics(pgdata, from, to)?;
        return Ok(Outcome::Upgraded { from, to });
    }
    let on_disk = major_on_disk(pgdata)?;
    // (The same major on both sides, as the process-level test runs it, is always upgraded.)
    if on_disk == to && from != to && !next.exists() {
        return Ok(Outcome::AlreadyUpgraded { to });
    }
    if on_disk != from {
        return Err(Error::State(format!(
            "{} holds PostgreSQL {on_disk}, the old installation is {from}",
            pgdata.display()
        )));
    }
    undo_link(pgdata)?;
    remove_dir(&next)?;
    let work = sibling(pgdata, "upgrade");
    remove_dir(&work)?;
    create_private_dir(&work)?;
    let libraries = old_libraries(request.old_root, &work)?;
    let old_bin = Installation::under(request.old_root, &old.bin_dir);
    let tool = |bin: &Path, name: &str| {
        let mut cmd = Command::new(bin.join(name));
        cmd.current_dir(&work);
        if let Some(dir) = &libraries {
            cmd.env("LD_LIBRARY_PATH", dir);
        }
        cmd
    };
    let checksums = checksums_on(tool(&old_bin, "pg_controldata").arg(pgdata))?;
    let mut initdb = tool(&new.bin_dir, "initdb");
    initdb
        .arg("-D")
        .arg(&next)
        .args(["-U", "postgres", "-E", "UTF8"])
        .args(["--auth-local=peer", "--auth-host=scram-sha-256"]);
    match (checksums, to >= 18) {
        (true, _) => initdb.arg("--data-checksums"),
        (false, true) => initdb.arg("--no-data-checksums"),
        (false, false) => &mut initdb,
    };
    run(&mut initdb, "initdb")?;
    let mut pg_upgrade = tool(&new.bin_dir, "pg_upgrade");
    pg_upgrade
        .arg("--old-bindir")
        .arg(&old_bin)
        .arg("--new-bindir")
        .arg(&new.bin_dir)
        .arg("--old-datadir")
        .arg(pgdata)
        .arg("--new-datadir")
        .arg(&next)
        .arg("--socketdir")
        .arg(&work)
        .args(["--username", "postgres"])
        // The old server as pg_upgrade starts it: no synchronous standby to wait for, no
        // archiving, no JIT (its LLVM is not carried).
        .args([
            "--old-options",
            "-c jit=off -c synchronous_standby_names='' -c archive_mode=off",
            "--new-options",
            "-c jit=off",
        ])
        .arg(if request.check_only {
            "--check"
        } else {
            "--link"
        });
    let upgraded = run(&mut pg_upgrade, "pg_upgrade").map_err(with_named_lists);
    if request.check_only || upgraded.is_err() {
        undo_link(pgdata)?;
        remove_dir(&next)?;
        remove_dir(&work)?;
        upgraded?;
        return Ok(Outcome::Checked { from, to });
    }
    std::fs::write(next.join(UPGRADED), format!("{from} -> {to}\n"))
        .map_err(Error::io("marking the upgraded directory"))?;
    sync_dir(&next)?;
    swap(pgdata, &next)?;
    ask_for_statistics(pgdata, from, to)?;
    remove_dir(&work)?;
    Ok(Outcome::Upgraded { from, to })
}

/// Writes `outcome` to `path` as JSON for the operator (a Job's termination message, at most
/// 4 KiB): `systemIdentifier` (PGDATA's, after an upgrade) or `error`. Best effort: the exit
/// status says the same.
pub fn report(path: &Path, pgdata: &Path, outcome: &Result<Outcome, Error>) {
    let json = match outcome {
        Ok(outcome) => serde_json::json!({
            "outcome": format!("{outcome:?}"),
            "systemIdentifier": crate::pgdata::system_identifier(pgdata),
        }),
        Err(error) => {
            // The end of the message names the failed check (and pg_upgrade's list).
            let said = error.to_string();
            let keep = said.len().saturating_sub(3500);
            let start = (keep..said.len())
                .find(|i| said.is_char_boundary(*i))
                .unwrap_or(0);
            serde_json::json!({ "error": &said[start..] })
        }
    };
    if let Err(e) = std::fs::write(path, json.to_string()) {
        tracing::warn!(error = %e, path = %path.display(), "writing the upgrade's report");
    }
}

/// pg_upgrade carries the optimizer statistics from 18 on; before, the primary's manager
/// gathers them once it serves (`statistics`).
fn ask_for_statistics(pgdata: &Path, from: u32, to: u32) -> Result<(), Error> {
    if to >= 18 {
        return Ok(());
    }
    std::fs::write(
        super::statistics::marker(pgdata),
        format!("{from} -> {to}\n"),
    )
    .map_err(Error::io("asking for the statistics after the upgrade"))
}

/// Gives PGDATA back whole when an upgrade stopped before `pg_upgrade` finished (its Job
/// killed mid-link in every retry, then given up): `global/pg_control` renamed back, the
/// unfinished new and work directories removed. The manager calls it before anything reads
/// PGDATA, or the old server would not start at all. One that finished (the mark written) is
/// left for the upgrade's next run to swap in. Returns whether it undid anything.
pub fn undo_interrupted(pgdata: &Path) -> Result<bool, Error> {
    let next = sibling(pgdata, "next");
    if next.join(UPGRADED).exists() {
        return Ok(false);
    }
    let (work, renamed) = (
        sibling(pgdata, "upgrade"),
        pgdata.join("global/pg_control.old"),
    );
    let left = next.exists() || work.exists() || renamed.exists();
    undo_link(pgdata)?;
    remove_dir(&next)?;
    remove_dir(&work)?;
    Ok(left)
}

/// `<pgdata>.<suffix>`, beside it on the same volume.
fn sibling(pgdata: &Path, suffix: &str) -> PathBuf {
    let name = pgdata
        .file_name()
        .map_or_else(|| "data".to_owned(), |n| n.to_string_lossy().into_owned());
    pgdata.with_file_name(format!("{name}.{suffix}"))
}

fn major_on_disk(pgdata: &Path) -> Result<u32, Error> {
    let path = pgdata.join("PG_VERSION");
    let text =
        std::fs::read_to_string(&path).map_err(Error::io(format!("reading {}", path.display())))?;
    text.trim()
        .parse()
        .map_err(|_| Error::State(format!("{} says {text:?}", path.display())))
}

/// `pg_upgrade --link` renames the old `global/pg_control` before it links; until the new
/// server has started, renaming it back gives the old directory back whole.
fn undo_link(pgdata: &Path) -> Result<(), Error> {
    let (control, renamed) = (
        pgdata.join("global/pg_control"),
        pgdata.join("global/pg_control.old"),
    );
    if renamed.exists() && !control.exists() {
        std::fs::rename(&renamed, &control).map_err(Error::io("restoring global/pg_control"))?;
    }
    Ok(())
}

/// The upgraded directory in PGDATA's place; the old one (links into the same files) removed.
fn swap(pgdata: &Path, next: &Path) -> Result<(), Error> {
    let old = sibling(pgdata, "old");
    remove_dir(&old)?;
    if pgdata.exists() {
        std::fs::rename(pgdata, &old).map_err(Error::io("moving the old data directory aside"))?;
    }
    std::fs::rename(next, pgdata).map_err(Error::io("moving the upgraded directory in"))?;
    if let Some(parent) = pgdata.parent() {
        sync_dir(parent)?;
    }
    remove_dir(&old)?;
    match std::fs::remove_file(pgdata.join(UPGRADED)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io("removing the upgrade's mark")(e))
        }
        _ => Ok(()),
    }
}

/// A directory of links to the carried libraries this image lacks; none when it lacks none.
fn old_libraries(old_root: &Path, work: &Path) -> Result<Option<PathBuf>, Error> {
    if !old_root.join(DEPS).exists() {
        return Ok(None);
    }
    let missing = missing_here(old_root, &library_dirs())?;
    if missing.is_empty() {
        return Ok(None);
    }
    let dir = work.join("libraries");
    create_private_dir(&dir)?;
    for name in missing {
        std::os::unix::fs::symlink(old_root.join(DEPS).join(&name), dir.join(&name))
            .map_err(Error::io(format!("linking {name}")))?;
    }
    Ok(Some(dir))
}

/// Whether `pg_controldata` reports data checksums.
fn checksums_on(cmd: &mut Command) -> Result<bool, Error> {
    let out = run(cmd, "pg_controldata")?;
    let version = out
        .lines()
        .find_map(|l| l.strip_prefix("Data page checksum version:"))
        .map(str::trim)
        .ok_or_else(|| Error::State("pg_controldata names no checksum version".into()))?;
    Ok(version != "0")
}

/// Runs `cmd`; its standard output, or its last lines (which name the failed check) in the
/// error.
fn run(cmd: &mut Command, tool: &str) -> Result<String, Error> {
    let out = cmd.output().map_err(Error::io(format!("running {tool}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok(stdout);
    }
    let said = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let tail: Vec<&str> = said.lines().rev().take(20).collect();
    Err(Error::Tool {
        tool: tool.to_owned(),
        status: out.status,
        stderr: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
    })
}

/// pg_upgrade names a file with the list of what failed a check (the libraries missing, the
/// tables using a type) inside the new directory, which is removed: the lists go into the error.
fn with_named_lists(error: Error) -> Error {
    let Error::Tool {
        tool,
        status,
        stderr,
    } = error
    else {
        return error;
    };
    let mut said = stderr.clone();
    for line in stderr.lines().map(str::trim) {
        if line.starts_with('/') && line.ends_with(".txt") {
            let list = std::fs::read_to_string(line).unwrap_or_default();
            let name = Path::new(line)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy();
            let list: String = list.chars().take(2000).collect();
            said.push_str(&format!("\n{name}:\n{}", list.trim_end()));
        }
    }
    Error::Tool {
        tool,
        status,
        stderr: said,
    }
}

fn remove_dir(dir: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("removing {}", dir.display()))(e))
        }
        _ => Ok(()),
    }
}

fn create_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(Error::io(format!("creating {}", dir.display())))
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(Error::io(format!("syncing {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PGDATA as `pg_upgrade --link` leaves it when killed mid-link: `global/pg_control`
    /// renamed, an unfinished `data.next` and the work directory beside it.
    fn interrupted(root: &Path) -> PathBuf {
        let pgdata = root.join("data");
        std::fs::create_dir_all(pgdata.join("global")).unwrap();
        std::fs::write(pgdata.join("global/pg_control.old"), b"control").unwrap();
        std::fs::create_dir_all(root.join("data.next/base")).unwrap();
        std::fs::create_dir_all(root.join("data.upgrade")).unwrap();
        pgdata
    }

    #[test]
    fn an_upgrade_killed_mid_link_gives_the_old_directory_back_at_the_next_start() {
        let root = tempfile::tempdir().unwrap();
        let pgdata = interrupted(root.path());
        assert!(undo_interrupted(&pgdata).unwrap());
        assert_eq!(
            std::fs::read(pgdata.join("global/pg_control")).unwrap(),
            b"control"
        );
        assert!(!pgdata.join("global/pg_control.old").exists());
        assert!(!root.path().join("data.next").exists());
        assert!(!root.path().join("data.upgrade").exists());
        // Nothing left to undo the next time.
        assert!(!undo_interrupted(&pgdata).unwrap());
    }

    #[test]
    fn a_finished_upgrade_is_left_for_its_swap() {
        let root = tempfile::tempdir().unwrap();
        let pgdata = interrupted(root.path());
        std::fs::write(root.path().join("data.next").join(UPGRADED), "15 -> 17\n").unwrap();
        assert!(!undo_interrupted(&pgdata).unwrap());
        assert!(pgdata.join("global/pg_control.old").exists());
        assert!(root.path().join("data.next").join(UPGRADED).exists());
    }
}
