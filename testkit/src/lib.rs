//! Test-only helpers shared by backup-agent's tests, the instance manager's tests and the e2e
//! scenarios (`tusk-e2e`): child processes killed with the test, store emulators on free
//! loopback ports, fake-gcs-server, a GCS front that checks service-account keys
//! ([`gcs_auth`]), and where PostgreSQL's tools are and how psql is scripted. Missing binaries fail loudly
//! (never a silent skip). Test code: failures panic with a message.

pub mod fakegcs;
pub mod gcs_auth;
pub mod minio;
pub mod process;
pub mod tls;
pub mod wal;

use std::time::{Duration, Instant};

/// psql's flags for scripted use, in every test that runs it: no ~/.psqlrc, unaligned, tuples
/// only, quiet, and stop at the first error (psql otherwise exits 0 after a failed statement).
pub const PSQL_SCRIPT: [&str; 6] = ["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"];

/// Runs `command` to completion; a failure to start or a non-zero exit panics with `what` and
/// its stderr (`what`, not the command's Debug form, which would show its environment).
pub fn output_ok(command: &mut std::process::Command, what: &str) -> std::process::Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs the openssl CLI (test keys and certificates), failing with its stderr.
pub fn openssl(args: &[&str]) {
    output_ok(
        std::process::Command::new("openssl").args(args),
        &format!("openssl {args:?}"),
    );
}

/// Writes a new 2048-bit RSA private key as PKCS#8 PEM to `pem`: the format of the
/// `private_key` in Google's service-account key files.
pub fn rsa_private_key(pem: &std::path::Path) {
    let pem = pem.to_str().expect("UTF-8 temp path");
    openssl(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        pem,
    ]);
}

/// A free port on 127.0.0.1 for a test's server, handed out once per machine at a time.
/// Below the ephemeral range: an ephemeral one (what binding port 0 gives) can be taken by any
/// outgoing connection (pg_basebackup's, say) before the server binds it. Claimed until this
/// process ends by an exclusive lock on `$TMPDIR/tusk-test-ports/PORT`: test executables run
/// side by side (scripts/workspace-tests.sh), and a port handed out stays free until its server
/// binds it — two of them starting a postmaster on one port failed CI with "Address already in
/// use". Never the same port twice in one process either.
pub fn free_port() -> u16 {
    use std::sync::Mutex;
    static CLAIMED: Mutex<Vec<(u16, std::fs::File)>> = Mutex::new(Vec::new());
    let locks = std::env::temp_dir().join("tusk-test-ports");
    std::fs::create_dir_all(&locks).expect("the directory of port locks");
    let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
    let seed = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
    // 7919 is prime to 12000: the walk visits every port of the range once.
    for i in 0..12000u32 {
        let port = 20000 + (seed.wrapping_add(i.wrapping_mul(7919)) % 12000) as u16;
        if claimed.iter().any(|(p, _)| *p == port) {
            continue;
        }
        let Ok(lock) = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(locks.join(port.to_string()))
        else {
            continue;
        };
        if lock.try_lock().is_ok() && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            claimed.push((port, lock));
            return port;
        }
    }
    panic!("no free port between 20000 and 32000 on 127.0.0.1")
}

/// Polls `ready` until it returns true or `timeout` passes.
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !ready().await {
        assert!(
            Instant::now() < deadline,
            "{what} not ready after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `url` answers 2xx, failing early if `service` exits; `ca` (PEM) is trusted for
/// https.
pub async fn wait_for_http(
    service: &mut process::Service,
    url: &str,
    timeout: Duration,
    ca: Option<&str>,
) {
    let mut http = reqwest::Client::builder();
    if let Some(pem) = ca {
        let ca = reqwest::Certificate::from_pem(pem.as_bytes()).expect("CA certificate PEM");
        http = http.add_root_certificate(ca);
    }
    let http = http.build().expect("HTTP client");
    let name = service.name.clone();
    wait_until(&name, timeout, || {
        service.assert_running();
        let (http, url) = (http.clone(), url.to_owned());
        async move {
            http.get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        }
    })
    .await;
}

/// The `bin` directory of the newest PostgreSQL server installed under /usr/lib/postgresql
/// (Debian's layout), or `TUSK_PG_BIN_DIR`.
pub fn pg_bin_dir() -> std::path::PathBuf {
    if let Ok(dir) = std::env::var("TUSK_PG_BIN_DIR") {
        return std::path::PathBuf::from(dir);
    }
    let mut found: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((major, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p).expect(
        "no PostgreSQL server found under /usr/lib/postgresql: apt-get install postgresql (or set TUSK_PG_BIN_DIR)",
    )
}

/// Path of a Go-built test binary: env var, else the testbin.sh cache.
pub fn testbin(env: &str, name: &str, version: &str) -> std::path::PathBuf {
    if let Ok(path) = std::env::var(env) {
        let path = std::path::PathBuf::from(path);
        assert!(
            path.is_file(),
            "{env}={} does not exist; run scripts/testbin.sh",
            path.display()
        );
        return path;
    }
    let cache = std::env::var("TUSK_TESTBIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                .join(".cache/tusk-testbin")
        });
    let path = cache.join(format!("{name}-{version}")).join(name);
    assert!(
        path.is_file(),
        "{name} not found at {} and {env} is unset: run `eval \"$(scripts/testbin.sh)\"` first",
        path.display()
    );
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_handed_out_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        for port in ports {
            assert!((20000..32000).contains(&port), "{port}");
            std::net::TcpListener::bind(("127.0.0.1", port)).expect("a handed-out port binds");
            // Claimed by this process: another one cannot take its lock.
            let lock = std::fs::File::open(
                std::env::temp_dir()
                    .join("tusk-test-ports")
                    .join(port.to_string()),
            )
            .expect("the port's lock file");
            assert!(lock.try_lock().is_err(), "{port} is not locked");
        }
    }
}
