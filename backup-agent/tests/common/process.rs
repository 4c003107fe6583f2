//! A child process killed when the test ends; its log is printed if the test failed.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct Service {
    pub name: String,
    child: Option<Child>,
    pub log: PathBuf,
}

impl Service {
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Service {
        let out = std::fs::File::create(&log).expect("create service log");
        let err = out.try_clone().expect("clone log handle");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Service {
            name: name.to_string(),
            child: Some(child),
            log,
        }
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
