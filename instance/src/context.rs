//! What every step needs: the configuration, the peers' addresses, the reaper that owns all
//! child processes, and where the PostgreSQL tools are.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::{Peers, RunArgs};
use crate::error::Error;
use crate::reaper::Reaper;

pub struct Context {
    pub args: RunArgs,
    pub peers: Peers,
    pub reaper: Arc<Reaper>,
    /// A promotion, a demotion or a switchover is under way: the server is asked about itself
    /// more often, so each of its steps is seen (and reported to the operator) sooner.
    hurry: AtomicBool,
}

impl Context {
    pub fn new(args: RunArgs, reaper: Arc<Reaper>) -> Result<Context, Error> {
        let peers = args.peers().map_err(Error::Config)?;
        Ok(Context {
            args,
            peers,
            reaper,
            hurry: AtomicBool::new(false),
        })
    }

    pub fn hurry(&self) -> bool {
        self.hurry.load(Ordering::Relaxed)
    }

    pub fn set_hurry(&self, hurry: bool) {
        self.hurry.store(hurry, Ordering::Relaxed);
    }

    pub fn me(&self) -> &str {
        &self.args.pod_name
    }

    /// A PostgreSQL program: from `TUSK_PG_BIN_DIR`, else looked up on PATH (the official
    /// images put their major's `bin` there).
    pub fn tool(&self, name: &str) -> Command {
        let program = match &self.args.pg_bin_dir {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        };
        let mut cmd = Command::new(program);
        // Tools read passwords from the passfile, never from the command line.
        cmd.env("PGPASSFILE", self.passfile())
            .env_remove("PGPASSWORD");
        cmd
    }

    /// The libpq password file: outside PGDATA, so neither pg_basebackup nor pg_rewind copies
    /// it between members.
    pub fn passfile(&self) -> PathBuf {
        self.args.socket_dir.join("tusk.pgpass")
    }

    pub fn pgdata(&self) -> &std::path::Path {
        &self.args.pgdata
    }
}
