//! `manifest.json`: written last, its presence is what makes a backup exist.

use serde::{Deserialize, Serialize};

use crate::compression::Compression;

/// Still 1: fields added since (`clusterUid`, `tables`) are optional, so every reader parses every
/// manifest, old or new (unknown fields are ignored, missing optional ones are `None`).
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format_version: u32,
    pub backup_id: String,
    pub namespace: String,
    pub cluster: String,
    /// `metadata.uid` of the PostgreSQL that wrote the backup: its owner. Namespace and name
    /// are not enough: a re-created cluster, or the same cluster in a second Kubernetes cluster
    /// (a DR pair) writing to the same bucket, has the same ones. `None` in manifests written
    /// before identities were recorded; see [`crate::ownership`] for how those are treated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_uid: Option<String>,
    pub started_at: jiff::Timestamp,
    pub completed_at: jiff::Timestamp,
    /// `server_version` as reported by the server, e.g. "15.14 (Debian 15.14-0+deb12u1)".
    pub server_version: String,
    /// First line of `pg_dump --version`.
    pub pg_dump_version: String,
    pub compression: Compression,
    pub files: Vec<ManifestFile>,
    /// Set for a physical base backup (`backup-agent base-backup`): where it sits in the WAL,
    /// which a restore must replay from the archive. `None` for logical backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical: Option<PhysicalBackup>,
}

/// A base backup's place in its system's WAL, from PostgreSQL's own `backup_manifest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhysicalBackup {
    /// The database system identifier (decimal): its WAL is under `wal/<this>/`.
    pub system_identifier: String,
    /// The timeline the backup started on.
    pub timeline: u32,
    /// The first WAL position a restore replays from (`X/Y`).
    pub start_lsn: String,
    /// The position a restore must reach before it is consistent.
    pub stop_lsn: String,
    /// The server's `wal_segment_size` in bytes: where the segment names of this system's
    /// archive fall in the WAL (retention by recovery window needs it to delete the segments
    /// before `startLsn`; without it, it deletes none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal_segment_size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// `pg_dumpall --globals-only` SQL (roles, tablespaces).
    Globals,
    /// `pg_dump -Fc` of one database.
    Database,
    /// `pg_basebackup -Ft` of the whole server, PostgreSQL's `backup_manifest` inside.
    Base,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestFile {
    /// File name inside the backup directory.
    pub name: String,
    pub kind: FileKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// Owner role of the database, used to recreate it on restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_owner: Option<String>,
    /// Bytes as stored (after compression).
    pub size_bytes: u64,
    /// Hex sha256 of the stored bytes.
    pub sha256: String,
    /// `pg_database_size` at backup time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_size_bytes: Option<u64>,
    /// The database's user tables and their exact row counts, counted inside the snapshot the
    /// dump itself used, so a restore must yield exactly these. `None` when they were not
    /// recorded (older agents, counting turned off, or no snapshot could be exported): a
    /// verification then reports the count check as not recorded, never as passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<Vec<TableCount>>,
}

/// One table of a dumped database and how many rows it held in the dump's snapshot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableCount {
    pub schema: String,
    pub name: String,
    pub rows: u64,
}

/// How a backup was taken, and so how it restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `pg_dump` per database: `restore` replays it into a running server.
    Logical,
    /// `pg_basebackup`: `base-restore` unpacks it and the WAL archive recovers it.
    Physical,
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Method::Logical => "logical",
            Method::Physical => "physical",
        })
    }
}

impl Manifest {
    pub fn method(&self) -> Method {
        match self.physical {
            Some(_) => Method::Physical,
            None => Method::Logical,
        }
    }

    pub fn total_size_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size_bytes).sum()
    }

    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(self)
    }

    pub fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_camel_case_names() {
        let m = Manifest {
            format_version: FORMAT_VERSION,
            backup_id: "b1".into(),
            namespace: "ns".into(),
            cluster: "db".into(),
            cluster_uid: Some("c0ffee".into()),
            started_at: "2026-11-22T02:00:00Z".parse().unwrap(),
            completed_at: "2026-11-22T02:01:00Z".parse().unwrap(),
            server_version: "15.14".into(),
            pg_dump_version: "pg_dump (PostgreSQL) 15.14".into(),
            compression: Compression::Zstd,
            files: vec![ManifestFile {
                name: "globals.sql.zst".into(),
                kind: FileKind::Globals,
                database: None,
                database_owner: None,
                size_bytes: 10,
                sha256: "00".into(),
                database_size_bytes: None,
                tables: None,
            }],
            physical: None,
        };
        let json = String::from_utf8(m.to_json().unwrap()).unwrap();
        assert!(json.contains("\"backupId\": \"b1\""));
        assert!(json.contains("\"startedAt\": \"2026-11-22T02:00:00Z\""));
        assert!(json.contains("\"kind\": \"globals\""));
        assert!(json.contains("\"clusterUid\": \"c0ffee\""));
        assert_eq!(Manifest::from_json(json.as_bytes()).unwrap(), m);
    }

    #[test]
    fn manifests_without_an_owner_still_parse() {
        let old = r#"{"formatVersion": 1, "backupId": "b1", "namespace": "ns", "cluster": "db",
            "startedAt": "2026-11-22T02:00:00Z", "completedAt": "2026-11-22T02:01:00Z",
            "serverVersion": "15.14", "pgDumpVersion": "pg_dump (PostgreSQL) 15.14",
            "compression": "zstd", "files": []}"#;
        let m = Manifest::from_json(old.as_bytes()).unwrap();
        assert_eq!(m.cluster_uid, None);
        let json = String::from_utf8(m.to_json().unwrap()).unwrap();
        assert!(
            !json.contains("clusterUid"),
            "no null written for older readers"
        );
    }

    #[test]
    fn recorded_table_counts_round_trip_and_are_optional() {
        let file = r#"{"name": "db-app.pgdump.zst", "kind": "database", "database": "app",
            "sizeBytes": 10, "sha256": "00",
            "tables": [{"schema": "public", "name": "orders", "rows": 20000}]}"#;
        let parsed: ManifestFile = serde_json::from_str(file).unwrap();
        assert_eq!(
            parsed.tables,
            Some(vec![TableCount {
                schema: "public".into(),
                name: "orders".into(),
                rows: 20000
            }])
        );
        let old = r#"{"name": "db-app.pgdump.zst", "kind": "database", "sizeBytes": 10,
            "sha256": "00"}"#;
        let parsed: ManifestFile = serde_json::from_str(old).unwrap();
        assert_eq!(parsed.tables, None);
        assert!(!serde_json::to_string(&parsed).unwrap().contains("tables"));
    }
}
