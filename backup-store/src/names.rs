//! The one rule set for the strings that become parts of object keys. The agent checks them here
//! (through [`crate::layout`]); the operator's CRD embeds the same patterns and lengths in its CEL
//! rules, so a spec accepted at `kubectl apply` is never refused by the agent, and the other way
//! round. `tests/contracts/names.json` holds the table both sides are tested with.

use regex::Regex;

/// A pattern and a length limit in characters, as a CRD expresses them (`matches()` and
/// `maxLength`). The patterns use only syntax RE2 (the API server) and `regex` read alike.
#[derive(Debug, Clone, Copy)]
pub struct NameRule {
    pub pattern: &'static str,
    pub max_len: usize,
}

impl NameRule {
    pub fn accepts(&self, value: &str) -> bool {
        value.chars().count() <= self.max_len
            // The patterns are constants, exercised by every test below.
            && Regex::new(self.pattern).is_ok_and(|re| re.is_match(value))
    }
}

/// The name of a PostgreSQL: a DNS label starting with a letter, short enough for its children.
pub const CLUSTER: NameRule = NameRule {
    pattern: "^[a-z]([-a-z0-9]*[a-z0-9])?$",
    max_len: 45,
};

/// A Kubernetes namespace: a DNS-1123 label.
pub const NAMESPACE: NameRule = NameRule {
    pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    max_len: 63,
};

/// A prefix inside the bucket: empty, or relative segments that are neither empty nor `.` or
/// `..`, with at most one trailing `/`.
pub const PATH: NameRule = NameRule {
    pattern: r"^([^/]*[^/.][^/]*|\.\.\.+)(/([^/]*[^/.][^/]*|\.\.\.+))*/?$|^$",
    max_len: 1024,
};

/// A backup id: one key segment of a safe character set (`latest` is checked separately: it
/// names the newest backup wherever an id is read).
pub const BACKUP_ID: NameRule = NameRule {
    pattern: "^[A-Za-z0-9][A-Za-z0-9._-]*$",
    max_len: 128,
};

/// A row of `tests/contracts/names.json`: the table that the agent's checks and the CRD's rules
/// are both tested with (here and in the operator's `crd::validation_tests::names`).
#[doc(hidden)]
#[derive(Debug, serde::Deserialize)]
pub struct ContractRow {
    /// `cluster`, `namespace`, `path` or `backupId`.
    pub field: String,
    value: String,
    /// How many times `value` is repeated (length limits).
    #[serde(default)]
    repeat: Option<usize>,
    pub accepted: bool,
    pub why: String,
}

impl ContractRow {
    pub fn value(&self) -> String {
        self.value.repeat(self.repeat.unwrap_or(1))
    }
}

/// The rows of the names table.
#[doc(hidden)]
pub fn contract_rows(table: &str) -> Result<Vec<ContractRow>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Table {
        rows: Vec<ContractRow>,
    }
    Ok(serde_json::from_str::<Table>(table)?.rows)
}

#[cfg(test)]
mod tests {
    use crate::layout::{ClusterLocation, validate_backup_id};

    /// The table the operator's CRD test reads too.
    const TABLE: &str = include_str!("../../tests/contracts/names.json");

    /// Whether the agent takes `value` for `field`, through the checks its commands apply.
    fn agent_accepts(field: &str, value: &str) -> bool {
        match field {
            "cluster" => ClusterLocation::new("", "ns", value).is_ok(),
            "namespace" => ClusterLocation::new("", value, "db").is_ok(),
            "path" => ClusterLocation::new(value, "ns", "db").is_ok(),
            // As catalog::resolve reads an id.
            "backupId" => value == "latest" || validate_backup_id(value).is_ok(),
            other => panic!("unknown field {other} in names.json"),
        }
    }

    #[test]
    fn the_agent_accepts_exactly_the_names_the_crd_accepts() {
        let rows = super::contract_rows(TABLE).unwrap();
        assert!(rows.len() >= 40);
        for row in rows {
            let value = row.value();
            let verdict = agent_accepts(&row.field, &value);
            assert_eq!(
                verdict, row.accepted,
                "{} {value:?}: {}",
                row.field, row.why
            );
        }
    }
}
