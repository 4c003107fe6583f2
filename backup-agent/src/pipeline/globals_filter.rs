//! Drops the statements of preserved roles from `pg_dumpall --globals-only` output.
//!
//! Replaying `ALTER ROLE postgres … PASSWORD …` from the source would overwrite the target
//! cluster's superuser password (which the operator manages), and likewise for an app role the
//! operator created with its own password. pg_dumpall writes each role statement on one line,
//! so a line filter is exact.

pub struct GlobalsFilter {
    prefixes: Vec<String>,
}

impl GlobalsFilter {
    /// `preserved`: roles that exist in the target and must keep their attributes and password.
    pub fn new<S: AsRef<str>>(preserved: &[S]) -> Self {
        let mut prefixes = Vec::new();
        for role in preserved {
            let role = role.as_ref();
            let plain = role.to_string();
            let quoted = format!("\"{}\"", role.replace('"', "\"\""));
            for name in [plain, quoted] {
                prefixes.push(format!("CREATE ROLE {name};"));
                prefixes.push(format!("ALTER ROLE {name} WITH "));
            }
        }
        GlobalsFilter { prefixes }
    }

    pub fn keep(&self, line: &str) -> bool {
        !self.prefixes.iter().any(|p| line.starts_with(p.as_str()))
    }
}

/// psql errors that are expected when replaying globals into an existing cluster.
pub fn is_fatal_psql_error(line: &str) -> bool {
    line.contains("ERROR:") && !line.contains("already exists")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_only_the_current_user() {
        let f = GlobalsFilter::new(&["postgres"]);
        assert!(!f.keep("CREATE ROLE postgres;"));
        assert!(!f.keep("ALTER ROLE postgres WITH SUPERUSER PASSWORD 'x';"));
        assert!(f.keep("CREATE ROLE postgres2;"));
        assert!(f.keep("ALTER ROLE postgres2 WITH LOGIN;"));
        assert!(f.keep("CREATE ROLE app;"));
        let f = GlobalsFilter::new(&["My User"]);
        assert!(!f.keep("CREATE ROLE \"My User\";"));
    }

    #[test]
    fn psql_errors() {
        assert!(!is_fatal_psql_error(
            "psql:<stdin>:3: ERROR:  role \"app\" already exists"
        ));
        assert!(is_fatal_psql_error("psql:<stdin>:3: ERROR:  syntax error"));
        assert!(!is_fatal_psql_error("NOTICE: something"));
    }
}
