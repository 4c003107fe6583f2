//! How a scenario ends when it does not pass: failed (with a message), or not run because the
//! run lacks a [`Level`] it needs. Not an `std::error::Error` itself, so that `?` converts every
//! library error into a failure.
//!
//! There is no other way to skip: a missing tool or file is a failure, and a scenario that
//! needs a level the run declares (`E2E_LEVELS`) fails if it cannot use it.

use std::collections::BTreeSet;
use std::fmt;

/// What a run may offer beyond the Kubernetes API. A run declares its levels (`E2E_LEVELS`,
/// comma-separated names; by default what its platform offers): a scenario needing one the run
/// does not declare is reported SKIP with the level; one it declares, the scenario must use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Real bytes through the Jobs: real PostgreSQL, the backup agent (TUSK_E2E_L4=1).
    L4,
    /// Tusk's pods really run: containers, probes, restarts (e2e/local's node, kind).
    Pods,
    /// Root on e2e/local's real node: into a pod's processes and network namespace.
    Node,
    /// e2e/local's own control plane and store: its audit log, its bucket from this host.
    OwnControlPlane,
    /// The operator runs as a process on this host (its loopback, its metrics port).
    OperatorProcess,
    /// A benchmark, run on demand by its script.
    Benchmark,
}

impl Level {
    pub const ALL: [Level; 6] = [
        Level::L4,
        Level::Pods,
        Level::Node,
        Level::OwnControlPlane,
        Level::OperatorProcess,
        Level::Benchmark,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Level::L4 => "l4",
            Level::Pods => "pods",
            Level::Node => "node",
            Level::OwnControlPlane => "own-control-plane",
            Level::OperatorProcess => "operator-process",
            Level::Benchmark => "benchmark",
        }
    }

    /// `E2E_LEVELS`: names separated by commas; an unknown name is an error.
    pub fn parse_list(list: &str) -> std::result::Result<BTreeSet<Level>, String> {
        (list.split(',').map(str::trim).filter(|n| !n.is_empty()))
            .map(|name| {
                (Level::ALL.into_iter().find(|l| l.name() == name))
                    .ok_or_else(|| format!("E2E_LEVELS: no level {name:?}"))
            })
            .collect()
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug)]
pub enum Failure {
    /// The run lacks `Level`: SKIP where the run does not declare it, a failure where it does.
    Absent(Level, String),
    Fail(String),
}

pub type Result<T = ()> = std::result::Result<T, Failure>;

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Absent(level, reason) => write!(f, "needs {level}: {reason}"),
            Failure::Fail(message) => f.write_str(message),
        }
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(err: E) -> Self {
        // The whole chain: kube's errors carry the API server's message in their source.
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !message.contains(&cause_text) {
                message = format!("{message}: {cause_text}");
            }
            source = cause.source();
        }
        Failure::Fail(message)
    }
}

/// `fail!("...")`: ends the scenario with that message.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)*) => {
        return Err($crate::Failure::Fail(format!($($arg)*)))
    };
}

/// `ensure!(condition, "...")`: fails the scenario with the message unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::fail!($($arg)*);
        }
    };
}

/// Says what was being done when an error happened.
pub trait Context<T> {
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E> Context<T> for std::result::Result<T, E>
where
    Failure: From<E>,
{
    fn context(self, what: impl fmt::Display) -> Result<T> {
        // Through `From`, so the error's whole chain is said: a driver's "db error" alone hides
        // the server's message.
        self.map_err(|e| Failure::Fail(format!("{what}: {}", Failure::from(e))))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.ok_or_else(|| Failure::Fail(what.to_string()))
    }
}

/// The run lacks `level`: `return Err(absent(Level::Pods, "..."))`.
pub fn absent(level: Level, reason: impl Into<String>) -> Failure {
    Failure::Absent(level, reason.into())
}
