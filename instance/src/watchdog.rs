//! The postmaster's watchdog: a small process of its own (`tusk-instance watchdog`) that fences
//! the primary when the manager itself stalls. The manager fences its primary once it could not
//! renew the Lease for the renew deadline — but only while its own loop runs. Frozen alone (a
//! stopped process, a runtime starved), it renews nothing while its postmaster goes on
//! accepting writes, and after the Lease duration the operator promotes another instance: two
//! writers. So every tick the manager tells the watchdog "postmaster P may run as primary until
//! T" (T = the last renew + the renew deadline + half a second: just after the moment the
//! manager would fence it, well before the Lease expires); a watchdog that reaches T without
//! hearing more stops P immediately (SIGQUIT, then SIGKILL). While the manager runs, it is
//! always the manager that fences first.
//!
//! The protocol is one line per tick on the watchdog's stdin: `<pid> <deadline>`, the deadline
//! in milliseconds of `CLOCK_MONOTONIC` (which both processes share); `0 0` disarms it.

use std::io::{BufRead, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::reaper::{Reaper, send_signal};

/// How often the watchdog looks at the time.
const CHECK: Duration = Duration::from_millis(100);
/// How long an immediate shutdown may take before the postmaster is killed.
const QUIT_GRACE: Duration = Duration::from_secs(1);

/// `CLOCK_MONOTONIC` in milliseconds.
pub fn monotonic_ms() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
    let millis = u64::try_from(now.tv_nsec).unwrap_or(0) / 1_000_000;
    seconds * 1000 + millis
}

/// What the watchdog was last told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Armed {
    pub pid: i32,
    pub deadline_ms: u64,
}

impl Armed {
    fn parse(line: &str) -> Option<Armed> {
        let (pid, deadline) = line.trim().split_once(' ')?;
        Some(Armed {
            pid: pid.parse().ok()?,
            deadline_ms: deadline.parse().ok()?,
        })
    }

    /// Whether the postmaster must be stopped at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.pid > 0 && now_ms >= self.deadline_ms
    }
}

/// The watchdog process's main loop: reads what the manager says, fences when told time ran
/// out. Ends when the manager closed its end and nothing is armed.
pub fn watch() -> Result<(), Error> {
    let (lines, heard) = mpsc::channel::<Option<Armed>>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if let Some(armed) = Armed::parse(&line) {
                let _ = lines.send(Some(armed));
            }
        }
        let _ = lines.send(None);
    });
    let mut armed = Armed::default();
    let mut manager_gone = false;
    loop {
        match heard.recv_timeout(CHECK) {
            Ok(Some(told)) => armed = told,
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => manager_gone = true,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if armed.expired(monotonic_ms()) {
            fence(armed.pid);
            armed = Armed::default();
        }
        if manager_gone && armed.pid == 0 {
            return Ok(());
        }
    }
}

/// Immediate shutdown of `pid`, then a kill if it did not end.
fn fence(pid: i32) {
    eprintln!(
        "tusk-instance watchdog: the manager did not renew in time; stopping postmaster {pid}"
    );
    send_signal(pid, libc::SIGQUIT);
    let until = Instant::now() + QUIT_GRACE;
    // SAFETY: kill with signal 0 only checks that the process exists.
    while Instant::now() < until && unsafe { libc::kill(pid, 0) } == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    send_signal(pid, libc::SIGKILL);
}

/// The manager's side: the watchdog process and the pipe it listens on.
pub struct Watchdog {
    _child: Child,
    stdin: ChildStdin,
    told: Armed,
}

impl Watchdog {
    /// Starts `tusk-instance watchdog` (this very executable).
    pub fn start(reaper: &Reaper) -> Result<Watchdog, Error> {
        let exe = std::env::current_exe().map_err(Error::io("finding this executable"))?;
        let mut cmd = Command::new(exe);
        cmd.arg("watchdog")
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        let mut spawned = reaper.spawn(&mut cmd, "the watchdog")?;
        let stdin = spawned
            .child
            .stdin
            .take()
            .ok_or_else(|| Error::State("the watchdog has no stdin".into()))?;
        // Never block the manager on a watchdog that stopped reading: a line is dropped then.
        // SAFETY: fcntl on a file descriptor this process owns.
        unsafe {
            let fd = stdin.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Ok(Watchdog {
            _child: spawned.child,
            stdin,
            told: Armed::default(),
        })
    }

    /// Tells the watchdog that postmaster `pid` may run as primary until `until` (`None`:
    /// disarmed: no primary runs here, or a fence is under way).
    pub fn arm(&mut self, pid: i32, until: Option<Instant>) {
        let armed = match until {
            Some(until) => {
                let left = until.saturating_duration_since(Instant::now());
                let left_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
                Armed {
                    pid,
                    deadline_ms: monotonic_ms().saturating_add(left_ms),
                }
            }
            None => Armed::default(),
        };
        // Only changes are worth a write; an unchanged deadline is already known.
        if armed == self.told {
            return;
        }
        let line = format!("{} {}\n", armed.pid, armed.deadline_ms);
        if self.stdin.write_all(line.as_bytes()).is_ok() {
            self.told = armed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_arms_the_watchdog_and_time_running_out_expires_it() {
        let armed = Armed::parse("4242 10000\n").expect("a line");
        assert_eq!(
            armed,
            Armed {
                pid: 4242,
                deadline_ms: 10_000
            }
        );
        assert!(!armed.expired(9_999));
        assert!(armed.expired(10_000));
        assert!(!Armed::parse("0 0").expect("disarm").expired(u64::MAX));
        assert_eq!(Armed::parse("garbage"), None);
    }
}
