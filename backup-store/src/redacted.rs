//! A secret held in a configuration (a password, a key): its `Debug` form is `<redacted>`, so a
//! struct holding one can derive `Debug` and still never print it.

use std::fmt;

#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    /// The secret itself, for the one place that hands it on (a request, an environment).
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Redacted<T> {
    fn from(secret: T) -> Self {
        Redacted(secret)
    }
}

impl From<&str> for Redacted<String> {
    fn from(secret: &str) -> Self {
        Redacted(secret.to_owned())
    }
}

impl<T> fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::Redacted;

    #[test]
    fn debug_never_shows_the_secret() {
        let secret: Redacted<String> = "hunter2".into();
        assert_eq!(format!("{secret:?}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(<redacted>)");
        assert_eq!(secret.expose(), "hunter2");
    }
}
