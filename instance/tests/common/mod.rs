//! A cluster of `tusk-instance run` processes on loopback, each with its own PGDATA, port and
//! status port, all obeying one JSON role file that stands in for the Lease. When the tests run
//! as root the managers run as `postgres` (the server refuses root), as in the image.

#![allow(dead_code)]

pub mod bucket;
pub mod restore;
mod tools;
pub mod upgrade;

pub use tools::*;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SUPERUSER_PASSWORD: &str = "super:pw\\1";
pub const APP_PASSWORD: &str = "app pw with 'quotes'";
pub const REPLICATION_PASSWORD: &str = "repl-pw";

pub fn pg_bin_dir() -> PathBuf {
    tusk_testkit::pg_bin_dir()
}

/// uid/gid of `postgres` when running as root, else None.
pub fn postgres_ids() -> Option<(u32, u32)> {
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    if uid.ok() != Some(0) {
        return None;
    }
    let id = |flag: &str| {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("id");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u32>()
            .expect("postgres id")
    };
    Some((id("-u"), id("-g")))
}

pub fn chown(path: &Path) {
    if let Some((uid, gid)) = postgres_ids() {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown to postgres");
    }
}

// Fields drop in order: the managers stop (and dump their logs) before the directory goes.
pub struct Cluster {
    pub members: Vec<Instance>,
    pub role_file: PathBuf,
    pub binary: PathBuf,
    pub dir: tempfile::TempDir,
}

pub struct Instance {
    pub name: String,
    pub port: u16,
    pub status_port: u16,
    pub pgdata: PathBuf,
    pub log: PathBuf,
    env: Vec<(String, String)>,
    child: Option<Child>,
    binary: PathBuf,
}

impl Cluster {
    pub fn new(names: &[&str]) -> Cluster {
        Self::with_settings(names, "")
    }

    /// Members whose postgresql.conf also holds `extra` (lines of settings).
    pub fn with_settings(names: &[&str], extra: &str) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("tusk-inst-")
            .tempdir()
            .expect("temp dir");
        chown(dir.path());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        // The managers must be able to execute the binary (the target dir may be private):
        // copy it with its own `install`, as the init container does.
        let binary = dir.path().join("bin/tusk-instance");
        std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_tusk-instance"))
            .arg("install")
            .arg(&binary)
            .output()
            .expect("tusk-instance install");
        assert!(
            out.status.success(),
            "install: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ports: Vec<(u16, u16)> = names.iter().map(|_| (free_port(), free_port())).collect();
        let peers = names
            .iter()
            .zip(&ports)
            .map(|(n, (p, _))| format!("{n}=127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        // TLS as in a pod: the server presents a certificate of a CA the managers are given,
        // and a connection without TLS is refused first, so every path of the managers' own
        // (streaming, cloning, rewinding, peer queries) is proven to use it.
        let tls_dir = dir.path().join("tls");
        std::fs::create_dir(&tls_dir).expect("tls dir");
        let tls = tusk_testkit::tls::issue(&tls_dir, &[]);
        for file in [
            &tls_dir,
            &tls.ca,
            &tls.cert,
            &tls.key,
            &tls.replication_cert,
            &tls.replication_key,
            &tls.upgrade_cert,
            &tls.upgrade_key,
        ] {
            chown(file);
        }
        let tls_settings = tusk_testkit::tls::server_settings(&tls);
        let token_file = dir.path().join("status-token");
        std::fs::write(&token_file, STATUS_TOKEN).expect("status token");
        chown(&token_file);
        let hba = dir.path().join("pg_hba.conf");
        std::fs::write(
            &hba,
            // The operator's rules for the machine roles (src/resources/hba.rs); the tests'
            // own superuser sessions over TCP as `spec.superuserAccess` allows them.
            "local all all peer\nhostnossl all all 127.0.0.1/32 reject\n\
             hostssl all tusk_replication 127.0.0.1/32 reject\n\
             hostssl postgres tusk_rewind 127.0.0.1/32 scram-sha-256 clientcert=verify-ca\n\
             hostssl all tusk_rewind 127.0.0.1/32 reject\n\
             hostssl all tusk_backup 127.0.0.1/32 scram-sha-256 clientcert=verify-ca\n\
             hostssl all tusk_upgrade 127.0.0.1/32 cert\n\
             host all all 127.0.0.1/32 scram-sha-256\n\
             hostssl replication tusk_replication 127.0.0.1/32 scram-sha-256 \
             clientcert=verify-full\n",
        )
        .unwrap();
        let role_file = dir.path().join("lease.json");
        let members = names
            .iter()
            .zip(&ports)
            .map(|(name, &(port, status_port))| {
                let home = dir.path().join(name);
                let run = home.join("run");
                std::fs::create_dir_all(&run).unwrap();
                chown(&home);
                chown(&run);
                let conf = home.join("postgresql.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "listen_addresses = '127.0.0.1'\nhba_file = '{}'\nfsync = off\n\
                         shared_buffers = 16MB\nwal_keep_size = '128MB'\n\
                         password_encryption = 'scram-sha-256'\n{tls_settings}{extra}",
                        hba.display()
                    ),
                )
                .unwrap();
                let pgdata = home.join("data");
                let env = [
                    ("PGDATA", pgdata.display().to_string()),
                    ("TUSK_POD_NAME", name.to_string()),
                    ("TUSK_CONFIG_FILE", conf.display().to_string()),
                    ("POSTGRES_PASSWORD", SUPERUSER_PASSWORD.into()),
                    ("TUSK_APP_USER", "app".into()),
                    ("TUSK_APP_DATABASE", "appdb".into()),
                    ("TUSK_APP_PASSWORD", APP_PASSWORD.into()),
                    ("TUSK_REPLICATION_PASSWORD", REPLICATION_PASSWORD.into()),
                    ("TUSK_STATUS_PORT", status_port.to_string()),
                    ("TUSK_PG_PORT", port.to_string()),
                    ("TUSK_SOCKET_DIR", run.display().to_string()),
                    ("TUSK_PG_BIN_DIR", pg_bin_dir().display().to_string()),
                    ("TUSK_PEER_HOSTS", peers.clone()),
                    ("TUSK_CA_FILE", tls.ca.display().to_string()),
                    ("TUSK_STATUS_TOKEN_FILE", token_file.display().to_string()),
                    // libpq looks for a client certificate under $HOME/.postgresql: the
                    // member's own home, as in a pod, not the test runner's (unreadable).
                    ("HOME", home.display().to_string()),
                    ("TUSK_ROLE_FILE", role_file.display().to_string()),
                    // Where a pod mounts Secret <name>-verifiers; empty unless a test writes.
                    (
                        "TUSK_VERIFIERS_DIR",
                        home.join("verifiers").display().to_string(),
                    ),
                    // Where Secret <name>-declared stands in; absent unless a test writes.
                    (
                        "TUSK_DECLARED_FILE",
                        home.join("declared.json").display().to_string(),
                    ),
                    ("RUST_LOG", "info".into()),
                ]
                .map(|(k, v)| (k.to_string(), v))
                .to_vec();
                Instance {
                    name: name.to_string(),
                    port,
                    status_port,
                    pgdata,
                    log: home.join("manager.log"),
                    env,
                    child: None,
                    binary: binary.clone(),
                }
            })
            .collect();
        Cluster {
            members,
            role_file,
            binary,
            dir,
        }
    }

    /// Writes the stand-in Lease atomically: holder, members, and whether renews succeed.
    pub fn set_lease(&self, holder: &str, renew: bool) {
        let names: Vec<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
        self.write_lease(serde_json::json!({
            "holder": holder, "instances": names.join(","),
            "leaseDurationSeconds": 6, "renew": renew,
        }));
    }

    /// `set_lease` with more of the Lease's fields (`systemIdentifier`, `releaseRequested`, as
    /// the role file spells the annotations).
    pub fn set_lease_with(&self, holder: &str, renew: bool, extra: serde_json::Value) {
        let names: Vec<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
        let mut lease = serde_json::json!({
            "holder": holder, "instances": names.join(","),
            "leaseDurationSeconds": 6, "renew": renew,
        });
        if let (Some(lease), Some(extra)) = (lease.as_object_mut(), extra.as_object()) {
            lease.extend(extra.clone());
        }
        self.write_lease(lease);
    }

    /// `set_lease` with the holder's address published (`tusk.dev/holder-address`).
    pub fn set_lease_at(&self, holder: &str, address: &str) {
        let names: Vec<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
        self.write_lease(serde_json::json!({
            "holder": holder, "instances": names.join(","),
            "leaseDurationSeconds": 6, "renew": true,
            "holderAddress": format!("{holder}={address}"),
        }));
    }

    /// Asks `holder` (the Lease's holder, renews accepted) to switch over to `target`, as the
    /// operator's Lease annotation does.
    pub fn request_switchover(&self, holder: &str, target: &str) {
        let names: Vec<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
        self.write_lease(serde_json::json!({
            "holder": holder, "instances": names.join(","),
            "leaseDurationSeconds": 6, "renew": true, "switchoverTo": target,
        }));
    }

    /// The stand-in Lease as it is now (a demoted holder rewrites it when it releases).
    pub fn lease(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(&self.role_file).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or_default()
    }

    fn write_lease(&self, json: serde_json::Value) {
        let tmp = self.role_file.with_extension("tmp");
        std::fs::write(&tmp, json.to_string()).unwrap();
        // Writable by the managers (the postgres user): a demoted holder releases it.
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::fs::rename(&tmp, &self.role_file).unwrap();
    }

    pub fn member(&mut self, name: &str) -> &mut Instance {
        self.members
            .iter_mut()
            .find(|m| m.name == name)
            .expect("member")
    }
}

impl Instance {
    pub fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("manager log");
        let mut cmd = Command::new(&self.binary);
        cmd.arg("run")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some((uid, gid)) = postgres_ids() {
            cmd.uid(uid).gid(gid);
        }
        self.child = Some(cmd.spawn().expect("start tusk-instance"));
    }

    /// SIGTERM (fast shutdown of its postmaster), then SIGKILL of whatever is left.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(30);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(pid) = self.postmaster_pid() {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    /// The manager's process id, while it runs.
    pub fn manager_pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Sends `signal` to the manager process alone (not its children).
    pub fn signal_manager(&self, signal: i32) {
        let child = self.child.as_ref().expect("manager running");
        unsafe { libc::kill(child.id() as i32, signal) };
    }

    /// Sends SIGTERM to the manager and waits for its exit status.
    pub fn terminate(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("manager running");
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let mut status = None;
        wait_for(
            &format!("{} exits after SIGTERM", self.name),
            timeout,
            || {
                status = child.try_wait().expect("try_wait");
                status.is_some()
            },
        );
        status.expect("exit status")
    }

    /// Zombies whose parent is the manager: orphans it failed to reap.
    pub fn zombie_children(&self) -> Vec<i32> {
        let Some(manager) = self.child.as_ref().map(|c| c.id().to_string()) else {
            return Vec::new();
        };
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let pid: i32 = e.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                // After the ")" that ends the command name: state, then the parent's pid.
                let mut fields = stat.rsplit_once(") ")?.1.split(' ');
                let (state, ppid) = (fields.next()?, fields.next()?);
                (state == "Z" && ppid == manager).then_some(pid)
            })
            .collect()
    }

    /// The live postmaster's pid (from postmaster.pid), if any.
    pub fn postmaster_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.pgdata.join("postmaster.pid")).ok()?;
        let pid: i32 = text.lines().next()?.trim().parse().ok()?;
        // Signal 0: is it alive (and not a zombie we never see, as it is not our child)?
        let alive = unsafe { libc::kill(pid, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "));
        alive.then_some(pid)
    }

    pub fn status(&self) -> Option<serde_json::Value> {
        let body = http_get(self.status_port, "/status")?;
        serde_json::from_str(&body).ok()
    }

    pub fn status_field(&self, field: &str) -> serde_json::Value {
        self.status().map(|s| s[field].clone()).unwrap_or_default()
    }

    /// Runs SQL over TCP with a password; Err carries psql's stderr.
    pub fn psql_as(
        &self,
        user: &str,
        password: &str,
        db: &str,
        sql: &str,
    ) -> Result<String, String> {
        psql_on(self.port, user, password, db, sql)
    }

    pub fn psql(&self, sql: &str) -> Result<String, String> {
        self.psql_as("postgres", SUPERUSER_PASSWORD, "postgres", sql)
    }

    /// A variable of the manager's environment.
    pub fn env_var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Sets (`Some`) or removes (`None`) a variable of the manager's environment, for its
    /// next start.
    pub fn set_env(&mut self, key: &str, value: Option<&str>) {
        self.env.retain(|(k, _)| k != key);
        if let Some(value) = value {
            self.env.push((key.to_string(), value.to_string()));
        }
    }

    /// Waits until /status shows a replica streaming from the Lease holder `holder`.
    pub fn wait_streaming_from(&self, holder: &str, timeout: Duration) {
        wait_for(
            &format!("{} streams from {holder}", self.name),
            timeout,
            || {
                self.status().is_some_and(|s| {
                    s["role"] == "replica"
                        && s["walReceiver"] == "streaming"
                        && s["leaseHolder"] == holder
                })
            },
        );
    }

    /// Waits until /status shows `role` and ready.
    pub fn wait_ready_as(&self, role: &str, timeout: Duration) {
        wait_for(&format!("{} ready as {role}", self.name), timeout, || {
            self.status()
                .is_some_and(|s| s["role"] == role && s["ready"] == true)
        });
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("TUSK_DUMP_LOGS").is_some() {
            dump(&self.name, &self.log);
        }
        self.stop();
    }
}

/// Two members, `demo-0` primary and `demo-1` streaming from it.
pub fn streaming_pair() -> Cluster {
    streaming_pair_with("")
}

/// Like [`streaming_pair`], with `settings` added to both members' postgresql.conf.
pub fn streaming_pair_with(settings: &str) -> Cluster {
    let mut cluster = Cluster::with_settings(&["demo-0", "demo-1"], settings);
    start_streaming(&mut cluster);
    cluster
}

/// Starts the first member as the Lease holder, then the others, and waits until every other
/// one streams from it.
pub fn start_streaming(cluster: &mut Cluster) {
    let names: Vec<String> = cluster.members.iter().map(|m| m.name.clone()).collect();
    let (holder, others) = names.split_first().expect("a member");
    cluster.set_lease(holder, true);
    cluster.member(holder).start();
    cluster
        .member(holder)
        .wait_ready_as("primary", Duration::from_secs(90));
    for name in others {
        cluster.member(name).start();
    }
    for name in others {
        let replica = cluster.member(name);
        replica.wait_ready_as("replica", Duration::from_secs(90));
        replica.wait_streaming_from(holder, Duration::from_secs(30));
    }
}

/// One member, `demo-0`, holding the Lease and running as primary.
pub fn single_primary() -> Cluster {
    let mut cluster = Cluster::new(&["demo-0"]);
    cluster.set_lease("demo-0", true);
    let primary = cluster.member("demo-0");
    primary.start();
    primary.wait_ready_as("primary", Duration::from_secs(90));
    cluster
}

/// Refuses demo-0's renews and waits until it has fenced itself (postmaster gone).
pub fn fence_demo_0(cluster: &mut Cluster) {
    cluster.set_lease("demo-0", false);
    let old = cluster.member("demo-0");
    wait_for("demo-0 fenced", Duration::from_secs(10), || {
        old.postmaster_pid().is_none() && old.status_field("role") == "fenced"
    });
}

/// Fences demo-0 (renews refused), then hands the Lease to demo-1 and waits for its promotion;
/// returns how long the promotion took after the handover.
pub fn fail_over(cluster: &mut Cluster) -> Duration {
    fence_demo_0(cluster);
    cluster.set_lease("demo-1", true);
    let new = cluster.member("demo-1");
    let took = wait_for("demo-1 promoted", Duration::from_secs(60), || {
        new.status()
            .is_some_and(|s| s["role"] == "primary" && s["ready"] == true && s["timeline"] == 2)
    });
    eprintln!("promotion: demo-1 primary on timeline 2 {took:?} after the handover");
    took
}

/// Waits until `sql` returns `expected` on `member`.
pub fn wait_for_value(member: &Instance, sql: &str, expected: &str, timeout: Duration) {
    wait_for(
        &format!("{} returns {expected:?} for {sql}", member.name),
        timeout,
        || member.psql(sql).is_ok_and(|v| v == expected),
    );
}

/// Inserts `value` into table `t` (created when missing) on `writer` and waits until `reader`
/// has replayed it.
pub fn write_and_see_replicated(writer: &Instance, reader: &Instance, value: &str) {
    writer
        .psql(&format!(
            "CREATE TABLE IF NOT EXISTS t (v text); INSERT INTO t VALUES ('{value}')"
        ))
        .unwrap();
    let sql = format!("SELECT count(*) FROM t WHERE v = '{value}'");
    wait_for_value(reader, &sql, "1", Duration::from_secs(60));
}
