//! How a scenario ends when it does not pass: failed (with a message) or skipped because the
//! platform cannot do what it needs. Not an `std::error::Error` itself, so that `?` converts
//! every library error into a failure.

use std::fmt;

#[derive(Debug)]
pub enum Failure {
    /// The platform lacks a hook the scenario needs: reported as SKIP, not as a failure.
    Skip(String),
    Fail(String),
}

pub type Result<T = ()> = std::result::Result<T, Failure>;

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Skip(reason) => write!(f, "SKIP: {reason}"),
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

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Failure::Fail(format!("{what}: {e}")))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.ok_or_else(|| Failure::Fail(what.to_string()))
    }
}

/// Skips the scenario: `return Err(skip("this platform cannot ..."))`.
pub fn skip(reason: impl Into<String>) -> Failure {
    Failure::Skip(reason.into())
}
