//! `kubectl tusk restore BACKUP --to NEW [--time T] [--dry-run]`: a new PostgreSQL with the
//! source cluster's spec and `spec.restore` naming the Backup, printed as YAML or applied
//! server-side. A physical Backup restores to a point in time: `--time`, else the end of the
//! archive (its bucket location comes from the Backup's status).

use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use tusk::crd::{
    Backup, BackupMethod, BackupPhase, LocalName, ObjectStoreRestore, PostgreSQL, RestoreSource,
    RestoreTarget,
};

use crate::cluster::get_postgresql;
use crate::error::{Error, Result};

/// Field manager of what the plugin applies.
pub const FIELD_MANAGER: &str = "kubectl-tusk";

/// The PostgreSQL `new` restoring `backup`: the source's spec (version, storage, resources,
/// parameters, backup policy) and the same bootstrap owner and database, so the restored
/// objects keep their owner; nothing of the source's metadata but its namespace.
pub fn restoring_cluster(
    source: &PostgreSQL,
    backup: &Backup,
    new: &str,
    time: Option<Timestamp>,
) -> Result<PostgreSQL> {
    if backup.phase() == BackupPhase::Failed {
        return Err(Error::Invalid(format!(
            "Backup {} failed and cannot be restored",
            backup.name_any()
        )));
    }
    if new == source.name_any() {
        return Err(Error::Invalid(format!(
            "--to {new} is the source cluster: restores go into a new cluster"
        )));
    }
    let mut spec = source.spec.clone();
    spec.restore = Some(match backup.spec.method {
        BackupMethod::Logical if time.is_some() => {
            return Err(Error::Invalid(format!(
                "--time needs a physical Backup (a base backup and the WAL archive); {} is a \
                 logical dump, restored as it was",
                backup.name_any()
            )));
        }
        BackupMethod::Logical => RestoreSource {
            backup: Some(LocalName {
                name: backup.name_any(),
            }),
            object_store: None,
            job_deadline_seconds: None,
            target: None,
        },
        BackupMethod::Physical => point_in_time(backup, time)?,
    });
    let mut pg = PostgreSQL::new(new, spec);
    pg.metadata.namespace = backup.namespace();
    Ok(pg)
}

/// A physical Backup as a point-in-time restore source: its bucket (from its status), its
/// cluster's prefix, and the target (`time`, else the end of the archive).
fn point_in_time(backup: &Backup, time: Option<Timestamp>) -> Result<RestoreSource> {
    let status = backup.status.clone().unwrap_or_default();
    let (Some(destination), BackupPhase::Completed) = (status.destination, backup.phase()) else {
        return Err(Error::Invalid(format!(
            "Backup {} is not Completed: a point-in-time restore starts from a complete base backup",
            backup.name_any()
        )));
    };
    Ok(RestoreSource {
        backup: None,
        object_store: Some(ObjectStoreRestore {
            destination,
            cluster: backup.spec.cluster.name.clone(),
            namespace: backup.namespace(),
            backup_id: status.backup_id.unwrap_or_else(|| backup.name_any()),
        }),
        job_deadline_seconds: None,
        target: Some(RestoreTarget {
            time: time.map(|t| t.to_string()),
            ..RestoreTarget::default()
        }),
    })
}

/// Builds the restoring cluster for Backup `namespace/backup`; applies it unless `dry_run`.
/// Returns it as YAML.
pub async fn run(
    client: &Client,
    namespace: &str,
    backup: &str,
    new: &str,
    time: Option<Timestamp>,
    dry_run: bool,
) -> Result<String> {
    let backups: Api<Backup> = Api::namespaced(client.clone(), namespace);
    let found = backups
        .get_opt(backup)
        .await
        .map_err(Error::kube(format!("reading Backup {namespace}/{backup}")))?
        .ok_or_else(|| Error::NotFound(format!("Backup {namespace}/{backup}")))?;
    let source = get_postgresql(client, namespace, &found.spec.cluster.name)
        .await
        .map_err(|e| match e {
            Error::NotFound(what) => Error::Invalid(format!(
                "{what}: its spec is the template of the restore; without it, write the \
                 PostgreSQL by hand with spec.restore.objectStore (see samples/postgresql-restore.yaml)"
            )),
            other => other,
        })?;
    let pg = restoring_cluster(&source, &found, new, time)?;
    if !dry_run {
        let api: Api<PostgreSQL> = Api::namespaced(client.clone(), namespace);
        api.patch(new, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&pg))
            .await
            .map_err(Error::kube(format!(
                "applying PostgreSQL {namespace}/{new}"
            )))?;
    }
    serde_saphyr::to_string(&pg).map_err(Error::encode(format!("PostgreSQL {new} as YAML")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn source() -> PostgreSQL {
        serde_json::from_value(json!({
            "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
            "metadata": {"name": "shop", "namespace": "prod", "uid": "u1",
                "resourceVersion": "7", "labels": {"team": "a"}},
            "spec": {"version": "17", "storage": {"size": "2Gi"},
                "parameters": {"work_mem": "8MB"},
                "bootstrap": {"database": "shop", "owner": "shop"}},
            "status": {"phase": "Ready"}
        }))
        .unwrap()
    }

    fn backup(phase: &str) -> Backup {
        tusk::crd::fixtures::backup("prod", "shop-manual", "shop", json!({"phase": phase}))
    }

    #[test]
    fn the_new_cluster_has_the_source_spec_and_restores_the_backup() {
        let pg = restoring_cluster(&source(), &backup("Completed"), "shop-copy", None).unwrap();
        let yaml = serde_saphyr::to_string(&pg).unwrap();
        let doc: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(
            doc,
            json!({
                "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
                "metadata": {"name": "shop-copy", "namespace": "prod"},
                "spec": {"version": "17", "instances": 1, "storage": {"size": "2Gi"},
                    "parameters": {"work_mem": "8MB"},
                    "bootstrap": {"database": "shop", "owner": "shop"},
                    "restore": {"backup": {"name": "shop-manual"}}}
            })
        );
    }

    #[test]
    fn failed_backups_and_the_source_itself_are_refused() {
        assert!(restoring_cluster(&source(), &backup("Failed"), "copy", None).is_err());
        assert!(restoring_cluster(&source(), &backup("Completed"), "shop", None).is_err());
        let time = Some("2026-11-28T10:00:00Z".parse().unwrap());
        let logical = restoring_cluster(&source(), &backup("Completed"), "copy", time);
        assert!(logical.is_err(), "--time needs a physical backup");
    }

    #[test]
    fn a_physical_backup_restores_its_bucket_to_the_time_given() {
        let mut base = tusk::crd::fixtures::backup(
            "prod",
            "shop-base",
            "shop",
            json!({"phase": "Completed", "backupId": "shop-base",
                "destination": {"s3": {"bucket": "backups", "path": "p"}}}),
        );
        base.spec.method = BackupMethod::Physical;
        let time = Some("2026-11-28T10:00:00+01:00".parse().unwrap());
        let pg = restoring_cluster(&source(), &base, "shop-copy", time).unwrap();
        let restore = serde_json::to_value(pg.spec.restore).unwrap();
        assert_eq!(
            restore,
            json!({"objectStore": {"destination": {"s3": {"bucket": "backups", "path": "p",
                "region": "us-east-1", "forcePathStyle": false}},
                "cluster": "shop", "namespace": "prod", "backupId": "shop-base"},
                "target": {"time": "2026-11-28T09:00:00Z"}})
        );
        let to_the_end = restoring_cluster(&source(), &base, "shop-copy", None).unwrap();
        let target = to_the_end.spec.restore.and_then(|r| r.target);
        assert_eq!(
            target,
            Some(RestoreTarget::default()),
            "the end of the archive"
        );
    }
}
