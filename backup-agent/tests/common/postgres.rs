//! A throwaway PostgreSQL server: initdb + pg_ctl in a temp dir, as `postgres` when root.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;

pub const PASSWORD: &str = "test-superuser-pw";

pub struct PgServer {
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The CA that signed the server's certificate (names `localhost` and 127.0.0.1): the
    /// server speaks TLS as a Tusk pod's does, and still accepts clients without it.
    pub ca: PathBuf,
    pub bin_dir: PathBuf,
    as_postgres: bool,
}

pub fn bin_dir() -> PathBuf {
    tusk_testkit::pg_bin_dir()
}

pub fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

impl PgServer {
    pub fn start() -> PgServer {
        Self::start_on(super::free_port())
    }

    pub fn start_on(port: u16) -> PgServer {
        Self::launch(port, None)
    }

    /// A server recovering from a copy of `base` (a base backup) with `settings` appended to
    /// its `postgresql.auto.conf` and a `recovery.signal`: a point-in-time restore.
    pub fn start_recovering(base: &std::path::Path, settings: &str) -> PgServer {
        Self::launch(super::free_port(), Some((base, settings)))
    }

    fn launch(port: u16, recover: Option<(&std::path::Path, &str)>) -> PgServer {
        let bin_dir = bin_dir();
        let as_postgres = running_as_root();
        let dir = tempfile::Builder::new()
            .prefix("tusk-pg-")
            .tempdir()
            .expect("temp dir");
        if as_postgres {
            // The server refuses to run as root; hand the directory to the postgres user.
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "chown postgres {}", dir.path().display());
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).expect("write pwfile");
        let data = dir.path().join("data");
        let tls = tusk_testkit::tls::issue(dir.path(), &[]);
        if as_postgres {
            Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&tls.key)
                .status()
                .expect("chown");
        }
        let server = PgServer {
            dir,
            port,
            ca: tls.ca.clone(),
            bin_dir,
            as_postgres,
        };
        if as_postgres {
            Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&pwfile)
                .status()
                .expect("chown");
        }
        match recover {
            Some((base, settings)) => server.copy_base(base, &data, settings),
            None => server.run_tool(
                "initdb",
                &[
                    "-D",
                    data.to_str().unwrap(),
                    "-U",
                    "postgres",
                    "--pwfile",
                    pwfile.to_str().unwrap(),
                    "--auth-host=scram-sha-256",
                    "--auth-local=trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "--no-sync",
                ],
            ),
        }
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off \
             -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            server.port,
            server.dir.path().display(),
            tls.cert.display(),
            tls.key.display()
        );
        let log = server.dir.path().join("server.log");
        server.run_tool(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        server
    }

    /// `base` copied to `data`, owned by the server's user, set to recover with `settings`.
    fn copy_base(&self, base: &std::path::Path, data: &std::path::Path, settings: &str) {
        let copied = Command::new("cp").arg("-a").arg(base).arg(data).status();
        assert!(copied.expect("cp").success(), "copying {}", base.display());
        let auto_conf = data.join("postgresql.auto.conf");
        let mut conf = std::fs::read_to_string(&auto_conf).unwrap_or_default();
        conf.push_str(settings);
        std::fs::write(&auto_conf, conf).expect("postgresql.auto.conf");
        std::fs::write(data.join("recovery.signal"), "").expect("recovery.signal");
        self.give_to_server(data);
    }

    /// Hands `path` (recursively) to the user the server runs as.
    pub fn give_to_server(&self, path: &std::path::Path) {
        if self.as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(path)
                .status();
            assert!(status.expect("chown").success(), "chown {}", path.display());
        }
    }

    /// Stops and starts the server with the options it was started with (for settings that
    /// need a restart, e.g. `archive_mode`).
    pub fn restart(&self) {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("server.log");
        let (data, log) = (data.to_str().unwrap(), log.to_str().unwrap());
        self.run_tool(
            "pg_ctl",
            &["-D", data, "-l", log, "-w", "-t", "60", "restart"],
        );
    }

    /// Stops the server at once, as a lost node does: no shutdown checkpoint, no last archive.
    pub fn crash(&self) {
        let data = self.dir.path().join("data");
        self.run_tool(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
    }

    fn command(&self, tool: &str) -> Command {
        let program = self.bin_dir.join(tool);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(program);
            cmd
        } else {
            Command::new(program)
        }
    }

    fn run_tool(&self, tool: &str, args: &[&str]) {
        let out = self
            .command(tool)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {tool}: {e}"));
        if !out.status.success() {
            let log = self.dir.path().join("server.log");
            super::process::dump_log("postgres", &log);
            panic!(
                "{tool} failed: {}\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Runs SQL as the superuser over TCP with a password, like the agent does; returns stdout.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let mut psql = Command::new(self.bin_dir.join("psql"));
        psql.args(tusk_testkit::PSQL_SCRIPT)
            .args(["-h", "127.0.0.1", "-U", "postgres"])
            .args(["-p", &self.port.to_string(), "-d", database, "-c", sql])
            .env("PGPASSWORD", PASSWORD);
        let out = tusk_testkit::output_ok(&mut psql, &format!("psql {sql:?}"));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Runs SQL as the superuser over the Unix socket (trust); returns stdout.
    pub fn psql_local(&self, database: &str, sql: &str) -> String {
        let mut psql = self.command("psql");
        psql.args(tusk_testkit::PSQL_SCRIPT)
            .args([
                "-h",
                &self.dir.path().display().to_string(),
                "-U",
                "postgres",
            ])
            .args(["-p", &self.port.to_string(), "-d", database, "-c", sql]);
        let out = tusk_testkit::output_ok(&mut psql, &format!("psql {sql:?}"));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn run_bin(&self, tool: &str, args: &[&str]) -> std::process::Output {
        Command::new(self.bin_dir.join(tool))
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-p",
                &self.port.to_string(),
            ])
            .args(args)
            .env("PGPASSWORD", PASSWORD)
            .output()
            .expect("run tool")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            super::process::dump_log("postgres", &self.dir.path().join("server.log"));
        }
        let data = self.dir.path().join("data");
        let _ = self
            .command("pg_ctl")
            .args([
                "-D",
                data.to_str().unwrap_or_default(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .output();
    }
}
