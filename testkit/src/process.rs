//! A child process killed when the test ends; its log is printed if the test failed.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct Service {
    pub name: String,
    child: Option<Child>,
    pub log: PathBuf,
    /// Kept to start the same process again (an outage that ends).
    cmd: Command,
}

impl Service {
    pub fn spawn(name: &str, cmd: Command, log: PathBuf) -> Service {
        std::fs::File::create(&log).expect("create service log");
        let mut service = Service {
            name: name.to_string(),
            child: None,
            log,
            cmd,
        };
        service.start();
        service
    }

    fn start(&mut self) {
        let out = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .expect("open service log");
        let err = out.try_clone().expect("clone log handle");
        let child = (self.cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.name));
        self.child = Some(child);
    }

    /// Kills the process (an outage); [`Service::restart`] brings it back with the same
    /// command, state and log.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        self.start();
    }

    pub fn assert_running(&mut self) {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            dump_log(&self.name, &self.log);
            panic!("{} exited early: {status}", self.name);
        }
    }
}

/// A store emulator (MinIO, fake-gcs-server) serving on a free loopback port.
pub struct Emulator {
    pub endpoint: String,
    _dir: tempfile::TempDir,
    service: Service,
    ready_url: String,
    ca: Option<String>,
    timeout: std::time::Duration,
}

impl Emulator {
    /// Starts `bin` configured by `configure(cmd, port, state dir)` and waits until `ready_path`
    /// answers: both emulators differ only in flags and their readiness URL.
    pub async fn start(
        name: &str,
        bin: PathBuf,
        configure: impl FnOnce(&mut Command, u16, &std::path::Path),
        ready_path: &str,
        timeout: std::time::Duration,
    ) -> Emulator {
        Self::start_tls(name, bin, configure, ready_path, timeout, None).await
    }

    /// As [`Emulator::start`]; with `ca` (PEM), the server speaks https with a certificate
    /// that CA signed.
    pub async fn start_tls(
        name: &str,
        bin: PathBuf,
        configure: impl FnOnce(&mut Command, u16, &std::path::Path),
        ready_path: &str,
        timeout: std::time::Duration,
        ca: Option<&str>,
    ) -> Emulator {
        let dir = tempfile::Builder::new()
            .prefix(&format!("tusk-{name}-"))
            .tempdir()
            .expect("temp dir");
        let port = crate::free_port();
        let scheme = if ca.is_some() { "https" } else { "http" };
        let endpoint = format!("{scheme}://127.0.0.1:{port}");
        let mut cmd = Command::new(bin);
        configure(&mut cmd, port, dir.path());
        let mut service = Service::spawn(name, cmd, dir.path().join(format!("{name}.log")));
        let ready_url = format!("{endpoint}{ready_path}");
        crate::wait_for_http(&mut service, &ready_url, timeout, ca).await;
        Emulator {
            endpoint,
            _dir: dir,
            service,
            ready_url,
            ca: ca.map(str::to_owned),
            timeout,
        }
    }

    /// Stops the server: every request fails (connection refused) until [`Emulator::resume`].
    pub fn stop(&mut self) {
        self.service.stop();
    }

    /// Starts the server again on the same port and state, and waits until it is ready.
    pub async fn resume(&mut self) {
        self.service.restart();
        let ca = self.ca.as_deref();
        crate::wait_for_http(&mut self.service, &self.ready_url, self.timeout, ca).await;
    }
}

pub fn dump_log(name: &str, log: &std::path::Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: String = text
        .chars()
        .rev()
        .take(4000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    eprintln!(
        "----- {name} log ({}) -----\n{tail}\n----- end of {name} log -----",
        log.display()
    );
}

impl Drop for Service {
    fn drop(&mut self) {
        if std::thread::panicking() {
            dump_log(&self.name, &self.log);
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
