//! A CA rotation under a running pair, step by step as the operator writes the server Secret
//! (`src/resources/ca_rotation.rs`): the new CA published beside the old one, then the leaves
//! (server and replication) signed by the new one with both trusted, then the old one dropped.
//! Meanwhile a writer inserts over fresh `verify-full` connections that trust whatever `ca.crt`
//! holds (as an application mounting its Secret does): no write fails, no postmaster restarts,
//! the standby reconnects after every step, and `/status` answers verified by the bundle.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

/// A psql command line over TLS, `verify-full` against `ca`, as `user`.
fn psql(port: u16, user: &str, ca: &Path, extra: &str) -> std::process::Command {
    let mut psql = std::process::Command::new(pg_bin_dir().join("psql"));
    psql.args(tusk_testkit::PSQL_SCRIPT).arg("-d").arg(format!(
        "host=localhost hostaddr=127.0.0.1 port={port} user={user} dbname=postgres \
         sslmode=verify-full sslrootcert={} connect_timeout=5 {extra}",
        ca.display()
    ));
    psql
}

/// Whether the replication role's certificate `cert` (and its key) logs in on `port`.
fn replication_login(port: u16, ca: &Path, cert: &Path, key: &Path) -> Result<String, String> {
    let extra = format!(
        "replication=true sslcert={} sslkey={}",
        cert.display(),
        key.display()
    );
    let mut command = psql(port, "tusk_replication", ca, &extra);
    command
        .args(["-c", "IDENTIFY_SYSTEM"])
        .env("PGPASSWORD", REPLICATION_PASSWORD);
    output_of(command)
}

/// `/status` verified against `ca` by the address in the certificate, with the token.
fn verified_status(port: u16, ca: &Path) -> bool {
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .arg("--cacert")
        .arg(ca)
        .args(["-H", &format!("Authorization: Bearer {STATUS_TOKEN}")])
        .arg(format!("https://127.0.0.1:{port}/status"))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout) == "200"
}

/// Replaces `name` in `dir` with `contents` as the kubelet does a Secret's file: whole, by a
/// rename, readable by the server's user.
fn swap(dir: &Path, name: &str, contents: &str) {
    let staged = dir.join(format!(".{name}.new"));
    std::fs::write(&staged, contents).expect("stage");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    if let Some((uid, gid)) = postgres_ids() {
        std::os::unix::fs::chown(&staged, Some(uid), Some(gid)).expect("chown");
    }
    std::fs::rename(&staged, dir.join(name)).expect("swap");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read")
}

/// Inserts a row per fresh verified connection until stopped; counts successes and keeps the
/// failures' messages.
struct Writer {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Writer {
    fn start(port: u16, ca: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, written, failures) = (stop.clone(), written.clone(), failures.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut insert = psql(port, "postgres", &ca, "");
                    insert
                        .args(["-c", "INSERT INTO marks DEFAULT VALUES"])
                        .env("PGPASSWORD", SUPERUSER_PASSWORD);
                    match output_of(insert) {
                        Ok(_) => {
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => failures.lock().expect("lock").push(e),
                    }
                }
            })
        };
        Self {
            stop,
            written,
            failures,
            thread,
        }
    }

    /// Waits until `more` rows beyond those written so far are in.
    fn wait_for_more(&self, more: u64) {
        let from = self.written.load(Ordering::Relaxed);
        wait_for("the writer goes on", Duration::from_secs(30), || {
            self.written.load(Ordering::Relaxed) >= from + more
        });
    }

    fn stop(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("writer");
        let failures = self.failures.lock().expect("lock").clone();
        (self.written.load(Ordering::Relaxed), failures)
    }
}

/// Ends the standby's replication connection and waits until it streams again over a new one,
/// made with whatever the files hold now.
fn reconnect_standby(primary: &Instance) {
    let walsender = "SELECT pid FROM pg_stat_replication WHERE state = 'streaming'";
    let before = primary.psql(walsender).expect("walsender");
    primary
        .psql("SELECT pg_terminate_backend(pid) FROM pg_stat_replication")
        .expect("terminate the walsender");
    wait_for(
        "the standby streams again over a new connection",
        Duration::from_secs(60),
        || {
            primary
                .psql(walsender)
                .is_ok_and(|pid| !pid.is_empty() && pid != before)
        },
    );
}

#[test]
fn a_ca_rotated_in_three_steps_fails_no_write_restarts_nothing_and_the_standby_follows() {
    let mut cluster = Cluster::new(&["demo-0", "demo-1"]);
    for member in &mut cluster.members {
        member.set_env("TUSK_TLS_POLL_MS", Some("200"));
    }
    start_streaming(&mut cluster);
    let tls = cluster.dir.path().join("tls");
    let (primary, replica) = (&cluster.members[0], &cluster.members[1]);
    let pids = (primary.postmaster_pid(), replica.postmaster_pid());
    primary
        .psql("CREATE TABLE marks (id bigserial PRIMARY KEY)")
        .expect("table");
    let old_ca = read(&tls.join("ca.crt"));
    let kept = tempfile::tempdir().expect("temp dir");
    let old_replication = (kept.path().join("old.crt"), kept.path().join("old.key"));
    std::fs::copy(tls.join("replication.crt"), &old_replication.0).expect("keep");
    std::fs::copy(tls.join("replication.key"), &old_replication.1).expect("keep");
    let new = tusk_testkit::tls::issue(kept.path(), &[]);
    let new_ca = read(&new.ca);
    let writer = Writer::start(primary.port, tls.join("ca.crt"));
    writer.wait_for_more(20);

    // 1. Published: the bundle trusts both; the old CA still signs everything.
    swap(&tls, "ca.crt", &format!("{old_ca}{new_ca}"));
    wait_for(
        "the primary trusts a client certificate of the new CA",
        Duration::from_secs(30),
        || {
            replication_login(
                primary.port,
                &tls.join("ca.crt"),
                &new.replication_cert,
                &new.replication_key,
            )
            .is_ok()
        },
    );
    reconnect_standby(primary);
    assert!(verified_status(primary.status_port, &tls.join("ca.crt")));
    writer.wait_for_more(20);

    // 2. Promoted: the new CA signs the server's and the replication role's certificates; the
    // bundle, new CA first, still trusts the old one.
    swap(&tls, "ca.crt", &format!("{new_ca}{old_ca}"));
    swap(&tls, "tls.key", &read(&new.key));
    swap(&tls, "tls.crt", &read(&new.cert));
    swap(&tls, "replication.key", &read(&new.replication_key));
    swap(&tls, "replication.crt", &read(&new.replication_cert));
    for member in [primary, replica] {
        wait_for(
            &format!("{} serves the new CA's certificate", member.name),
            Duration::from_secs(30),
            || {
                let mut probe = psql(member.port, "postgres", &new.ca, "");
                probe
                    .args(["-c", "SELECT 1"])
                    .env("PGPASSWORD", SUPERUSER_PASSWORD);
                output_of(probe).is_ok()
            },
        );
        wait_for(
            &format!("{}'s status port serves it", member.name),
            Duration::from_secs(30),
            || verified_status(member.status_port, &new.ca),
        );
    }
    reconnect_standby(primary);
    writer.wait_for_more(20);

    // 3. Steady: the old CA is trusted no more.
    swap(&tls, "ca.crt", &new_ca);
    wait_for(
        "the primary refuses the old CA's client certificate",
        Duration::from_secs(30),
        || {
            replication_login(
                primary.port,
                &tls.join("ca.crt"),
                &old_replication.0,
                &old_replication.1,
            )
            .is_err_and(|e| e.contains("unknown ca"))
        },
    );
    reconnect_standby(primary);
    writer.wait_for_more(20);

    let (written, failures) = writer.stop();
    assert!(
        failures.is_empty(),
        "{} writes failed: {failures:?}",
        failures.len()
    );
    wait_for_value(
        replica,
        "SELECT count(*) FROM marks",
        &written.to_string(),
        Duration::from_secs(60),
    );
    assert_eq!(
        (primary.postmaster_pid(), replica.postmaster_pid()),
        pids,
        "a postmaster was restarted"
    );
    eprintln!("rotation: {written} writes over fresh verified connections, 0 failed");
}
