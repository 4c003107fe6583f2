//! Object key layout: `<path>/<namespace>/<cluster>/<backupId>/<file>`.
//!
//! Every prefix handed to a store ends with `/`, so cluster `db` never matches `db2`.

use crate::names;

pub const MANIFEST_FILE: &str = "manifest.json";

/// A path, namespace, cluster or backup id that cannot be part of a key (rules in [`names`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error(
        "path {0:?} must be at most 1024 characters of relative segments, none empty, '.' or '..', without a leading '/'"
    )]
    Path(String),
    #[error(
        "namespace {0:?} must be a Kubernetes namespace name (a DNS label of at most 63 characters)"
    )]
    Namespace(String),
    #[error(
        "cluster {0:?} must be the name of a PostgreSQL: at most 45 lowercase letters, digits and '-', starting with a letter"
    )]
    Cluster(String),
    #[error(
        "backup id {0:?} must be 1-128 characters of [A-Za-z0-9._-], start with a letter or digit, and not be 'latest'"
    )]
    BackupId(String),
}

/// Where one cluster's backups live inside a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLocation {
    path: String,
    namespace: String,
    cluster: String,
}

impl ClusterLocation {
    /// `path` may be empty or contain `/`; namespace and cluster are single segments. Each is
    /// checked with the rule the operator's CRD applies to the field it comes from.
    pub fn new(path: &str, namespace: &str, cluster: &str) -> Result<Self, LayoutError> {
        if !names::NAMESPACE.accepts(namespace) {
            return Err(LayoutError::Namespace(namespace.to_string()));
        }
        if !names::CLUSTER.accepts(cluster) {
            return Err(LayoutError::Cluster(cluster.to_string()));
        }
        if !names::PATH.accepts(path) {
            return Err(LayoutError::Path(path.to_string()));
        }
        Ok(ClusterLocation {
            path: path.strip_suffix('/').unwrap_or(path).to_string(),
            namespace: namespace.to_string(),
            cluster: cluster.to_string(),
        })
    }

    /// `<path>/<namespace>/<cluster>/`, always ending with `/`.
    pub fn prefix(&self) -> String {
        if self.path.is_empty() {
            format!("{}/{}/", self.namespace, self.cluster)
        } else {
            format!("{}/{}/{}/", self.path, self.namespace, self.cluster)
        }
    }

    /// Where the WAL of the database system `system_identifier` is archived (`wal.rs`). A
    /// cluster name starts with a letter, so no other cluster's prefix can be under it.
    pub fn wal_prefix(&self, system_identifier: u64) -> String {
        format!("{}wal/{system_identifier}/", self.prefix())
    }

    pub fn backup_prefix(&self, backup_id: &str) -> String {
        format!("{}{}/", self.prefix(), backup_id)
    }

    pub fn object_key(&self, backup_id: &str, file: &str) -> String {
        format!("{}{}", self.backup_prefix(backup_id), file)
    }

    pub fn manifest_key(&self, backup_id: &str) -> String {
        self.object_key(backup_id, MANIFEST_FILE)
    }

    /// Splits a key listed under [`Self::prefix`] into (backupId, file name inside it).
    /// Keys not directly inside a backup directory (deeper or shallower) return `None`.
    pub fn parse_key<'a>(&self, key: &'a str) -> Option<(&'a str, &'a str)> {
        let prefix = self.prefix();
        let rest = key.strip_prefix(prefix.as_str())?;
        let (id, file) = rest.split_once('/')?;
        if id.is_empty() || file.is_empty() || file.contains('/') {
            return None;
        }
        Some((id, file))
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn cluster(&self) -> &str {
        &self.cluster
    }
}

/// Backup ids become one key segment; keep them to a safe character set.
pub fn validate_backup_id(id: &str) -> Result<(), LayoutError> {
    if id != "latest" && names::BACKUP_ID.accepts(id) {
        Ok(())
    } else {
        Err(LayoutError::BackupId(id.to_string()))
    }
}

/// Default backup id: the UTC start time, e.g. `20261122T020000Z` (sorts by time).
pub fn default_backup_id(now: jiff::Timestamp) -> String {
    now.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// File name of a database dump inside a backup. Database names may hold any character,
/// so everything outside a safe set is percent-encoded; the manifest keeps the real name.
pub fn database_file_name(database: &str, extension: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const KEEP: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_');
    format!(
        "db-{}.pgdump{extension}",
        utf8_percent_encode(database, KEEP)
    )
}

pub fn globals_file_name(extension: &str) -> String {
    format!("globals.sql{extension}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_segment_exact() {
        let db = ClusterLocation::new("backups/", "ns", "db").unwrap();
        assert_eq!(db.prefix(), "backups/ns/db/");
        assert!(!"backups/ns/db2/x/manifest.json".starts_with(&db.prefix()));
        assert_eq!(db.parse_key("backups/ns/db2/x/manifest.json"), None);
        assert_eq!(
            db.parse_key("backups/ns/db/x/manifest.json"),
            Some(("x", "manifest.json"))
        );
    }

    #[test]
    fn empty_path_has_no_leading_slash() {
        let loc = ClusterLocation::new("", "ns", "db").unwrap();
        assert_eq!(loc.prefix(), "ns/db/");
        assert_eq!(loc.manifest_key("b1"), "ns/db/b1/manifest.json");
        let loc = ClusterLocation::new("a/b/", "ns", "db").unwrap();
        assert_eq!(loc.prefix(), "a/b/ns/db/");
    }

    #[test]
    fn rejects_bad_segments() {
        assert!(ClusterLocation::new("", "ns", "a/b").is_err());
        assert!(ClusterLocation::new("", "", "db").is_err());
        assert!(ClusterLocation::new("../x", "ns", "db").is_err());
        assert!(validate_backup_id("latest").is_err());
        assert!(validate_backup_id("a/b").is_err());
        assert!(validate_backup_id("20261122T020000Z").is_ok());
    }

    #[test]
    fn nested_or_shallow_keys_are_ignored() {
        let loc = ClusterLocation::new("p", "ns", "db").unwrap();
        assert_eq!(loc.parse_key("p/ns/db/x/y/z"), None);
        assert_eq!(loc.parse_key("p/ns/db/x"), None);
    }

    #[test]
    fn database_names_are_encoded() {
        assert_eq!(database_file_name("app", ".zst"), "db-app.pgdump.zst");
        assert_eq!(database_file_name("a b/é", ""), "db-a%20b%2F%C3%A9.pgdump");
    }

    #[test]
    fn default_id_format() {
        let t: jiff::Timestamp = "2026-11-22T02:00:00Z".parse().unwrap();
        assert_eq!(default_backup_id(t), "20261122T020000Z");
    }
}
