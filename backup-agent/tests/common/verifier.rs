//! Runs `backup-agent verify-restore` the way its Job will: as a non-root user (the `postgres`
//! user when the tests run as root, like the PostgreSQL servers of `postgres.rs`), with a
//! scratch directory and a termination-message file it can write.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::stores::TestStore;

pub struct Verifier {
    /// Parent of the agent's scratch directories: empty again after every run.
    pub scratch: tempfile::TempDir,
    /// The agent binary, where the non-root user can execute it.
    binary: PathBuf,
    as_postgres: bool,
}

impl Verifier {
    pub fn new() -> Verifier {
        let as_postgres = super::postgres::running_as_root();
        let scratch = tempfile::Builder::new()
            .prefix("tusk-scratch-")
            .tempdir()
            .expect("scratch dir");
        let mut binary = PathBuf::from(env!("CARGO_BIN_EXE_backup-agent"));
        if as_postgres {
            chown_postgres(scratch.path());
            // The target dir may sit under a home the postgres user cannot enter.
            let copy = scratch.path().join("bin");
            std::fs::create_dir(&copy).expect("bin dir");
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            let linked = copy.join("backup-agent");
            if std::fs::hard_link(&binary, &linked).is_err() {
                std::fs::copy(&binary, &linked).expect("copy the agent");
            }
            binary = linked;
        }
        Verifier {
            scratch,
            binary,
            as_postgres,
        }
    }

    /// `verify-restore --backup-id <id>` of `store`'s cluster `cluster`, configured by env only.
    pub fn command(&self, store: &TestStore, cluster: &str, backup_id: &str) -> Command {
        let template = super::agent::agent(store, cluster, None);
        let mut cmd = if self.as_postgres {
            let mut cmd = Command::new("/usr/sbin/runuser");
            cmd.args(["-u", "postgres", "--"]).arg(&self.binary);
            cmd
        } else {
            Command::new(&self.binary)
        };
        cmd.env_clear();
        for (key, value) in template.get_envs() {
            if let Some(value) = value {
                cmd.env(key, value);
            }
        }
        cmd.env("TUSK_SCRATCH_DIR", self.scratch.path())
            .env("TUSK_PG_BIN_DIR", super::postgres::bin_dir())
            .env("TUSK_TERMINATION_LOG", self.termination_log())
            .args(["verify-restore", "--backup-id", backup_id]);
        cmd
    }

    pub fn termination_log(&self) -> PathBuf {
        self.scratch.path().join("termination-log")
    }

    /// Runs; returns the exit code, the stdout report and the termination-message report,
    /// after checking the scratch server's directory is gone.
    pub fn run(&self, cmd: Command) -> (i32, serde_json::Value, serde_json::Value) {
        let _ = std::fs::remove_file(self.termination_log());
        let out: Output = super::agent::run(cmd);
        let summary = super::agent::summary(&out);
        let written =
            std::fs::read_to_string(self.termination_log()).expect("a termination message");
        let terminated: serde_json::Value =
            serde_json::from_str(&written).expect("the termination message is the JSON report");
        assert!(written.len() <= 4096, "{} bytes", written.len());
        self.assert_cleaned_up();
        (
            out.status.code().expect("exit code"),
            summary["details"].clone(),
            terminated,
        )
    }

    /// No scratch server directory (data, socket, downloads) is left behind.
    pub fn assert_cleaned_up(&self) {
        let left: Vec<String> = std::fs::read_dir(self.scratch.path())
            .expect("read scratch dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("tusk-verify-"))
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

fn chown_postgres(path: &Path) {
    let status = Command::new("chown")
        .arg("postgres:postgres")
        .arg(path)
        .status()
        .expect("chown");
    assert!(status.success(), "chown postgres {}", path.display());
}

/// The check named `name` of a report.
pub fn check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name} in {report}"))
}
