//! The manifests the scenarios apply: small clusters, their S3 backup destinations, Backups.

use crate::settings::IN_CLUSTER_MINIO;

/// A nightly S3 backup to the bucket `tusk-backups`, with the credentials Secret `e2e-s3`.
#[derive(Debug, Clone)]
pub struct S3Backup {
    pub keep: u32,
    /// `None`: the default (Retain), as a user would leave it.
    pub on_delete: Option<&'static str>,
    pub path: &'static str,
    pub endpoint: String,
}

impl S3Backup {
    /// What the core scenarios use: path `e2e`, keep 3, the in-cluster MinIO.
    pub fn nightly() -> Self {
        S3Backup {
            keep: 3,
            on_delete: None,
            path: "e2e",
            endpoint: IN_CLUSTER_MINIO.into(),
        }
    }

    /// What the backup lifecycle scenarios use: path `lifecycle` (their own, so that emptying
    /// a prefix can be checked exactly), an endpoint the operator itself reaches.
    pub fn lifecycle(keep: u32, on_delete: &'static str, endpoint: &str) -> Self {
        S3Backup {
            keep,
            on_delete: Some(on_delete),
            path: "lifecycle",
            endpoint: endpoint.into(),
        }
    }
}

/// A small PostgreSQL 18 (1 GiB), with its backup and credentials Secret when given.
pub fn cluster(name: &str, backup: Option<&S3Backup>) -> String {
    let mut yaml = format!(
        "apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {{name: {name}}}
spec:
  version: \"18\"
  storage: {{size: 1Gi}}
"
    );
    if let Some(b) = backup {
        yaml.push_str(&format!(
            "  backup:
    schedule: \"0 2 * * *\"
    retention: {{keep: {keep}}}
{on_delete}{destination}",
            keep = b.keep,
            on_delete = b
                .on_delete
                .map(|o| format!("    onDelete: {o}\n"))
                .unwrap_or_default(),
            destination = destination(b.path, &b.endpoint),
        ));
    }
    yaml
}

/// An on-demand Backup of `cluster`.
pub fn backup(name: &str, cluster: &str) -> String {
    format!(
        "apiVersion: tusk.dev/v1alpha1
kind: Backup
metadata: {{name: {name}}}
spec: {{cluster: {{name: {cluster}}}}}
"
    )
}

/// A cluster restored from the Backup `backup`.
pub fn restored_cluster(name: &str, backup: &str) -> String {
    cluster(name, None) + &format!("  restore: {{backup: {{name: {backup}}}}}\n")
}

/// [`crate::replication::replicated`] archiving its WAL (`walArchive: {}`) under path `pitr` of
/// the bucket `tusk-backups` at `endpoint`, with the credentials Secret `e2e-s3`.
pub fn archiving(name: &str, instances: u8, endpoint: &str) -> String {
    archived(&crate::replication::replicated(name, instances), endpoint)
}

/// Cluster manifest `cluster` (one document, its spec last) archiving as [`archiving`] does.
pub fn archived(cluster: &str, endpoint: &str) -> String {
    format!(
        "{cluster}  backup:
    schedule: \"0 2 * * *\"
    walArchive: {{}}
{}",
        destination("pitr", endpoint)
    )
}

/// A new cluster of `instances` restoring [`archiving`] cluster `source`'s archive to `target`
/// (YAML flow, e.g. `{time: "2026-11-28T10:00:00Z"}`, or `{}` for the end of the archive),
/// as `samples/postgresql-pitr.yaml` does: the newest base backup that reaches it.
pub fn point_in_time(
    name: &str,
    instances: u8,
    source: &str,
    target: &str,
    endpoint: &str,
) -> String {
    // The archive's destination block, two levels deeper under restore.objectStore.
    let destination = destination("pitr", endpoint);
    let (block, secret) = destination
        .split_once("---\n")
        .unwrap_or((destination.as_str(), ""));
    let block: String = block.lines().map(|line| format!("  {line}\n")).collect();
    format!(
        "{}  restore:
    objectStore:
      cluster: {source}
      backupId: latest
{block}    target: {target}
---
{secret}",
        crate::replication::replicated(name, instances),
    )
}

/// `spec.backup.destination`: the bucket `tusk-backups` under `path` at `endpoint`, with the
/// credentials Secret `e2e-s3` (appended as a second document).
fn destination(path: &str, endpoint: &str) -> String {
    format!(
        "    destination:
      s3:
        bucket: tusk-backups
        path: {path}
        endpoint: {endpoint}
        forcePathStyle: true
        credentials:
          accessKeyId: {{name: e2e-s3, key: access-key}}
          secretAccessKey: {{name: e2e-s3, key: secret-key}}
---
apiVersion: v1
kind: Secret
metadata: {{name: e2e-s3}}
stringData: {{access-key: minioadmin, secret-key: minioadmin}}
"
    )
}

/// An on-demand physical (base) Backup of `cluster`.
pub fn physical_backup(name: &str, cluster: &str) -> String {
    format!(
        "apiVersion: tusk.dev/v1alpha1
kind: Backup
metadata: {{name: {name}}}
spec: {{cluster: {{name: {cluster}}}, method: physical}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_in_time_restore_is_a_cluster_with_its_source_and_target() {
        let yaml = point_in_time(
            "copy",
            2,
            "src",
            "{time: \"2026-11-28T10:00:00Z\"}",
            "http://m",
        );
        let docs = crate::apply::documents(&yaml).unwrap();
        assert_eq!(docs.len(), 2, "the cluster and the credentials Secret");
        let restore = &docs[0]["spec"]["restore"];
        assert_eq!(restore["objectStore"]["cluster"], "src");
        assert_eq!(restore["objectStore"]["destination"]["s3"]["path"], "pitr");
        assert_eq!(restore["target"]["time"], "2026-11-28T10:00:00Z");
        assert_eq!(docs[1]["kind"], "Secret");
        let to_end = point_in_time("copy", 1, "src", "{}", "http://m");
        let docs = crate::apply::documents(&to_end).unwrap();
        assert_eq!(docs[0]["spec"]["restore"]["target"], serde_json::json!({}));
    }
}
