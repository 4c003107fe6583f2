//! `kubectl tusk restore BACKUP --to NEW [--dry-run]`: a new PostgreSQL with the source
//! cluster's spec and `spec.restore.backup` naming the Backup, printed as YAML or applied
//! server-side.

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use tusk::crd::{Backup, BackupPhase, LocalName, PostgreSQL, RestoreSource};

use crate::cluster::get_postgresql;
use crate::error::{Error, Result};

/// Field manager of what the plugin applies.
pub const FIELD_MANAGER: &str = "kubectl-tusk";

/// The PostgreSQL `new` restoring `backup`: the source's spec (version, storage, resources,
/// parameters, backup policy) and the same bootstrap owner and database, so the restored
/// objects keep their owner; nothing of the source's metadata but its namespace.
pub fn restoring_cluster(source: &PostgreSQL, backup: &Backup, new: &str) -> Result<PostgreSQL> {
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
    spec.restore = Some(RestoreSource {
        backup: Some(LocalName {
            name: backup.name_any(),
        }),
        object_store: None,
        job_deadline_seconds: None,
    });
    let mut pg = PostgreSQL::new(new, spec);
    pg.metadata.namespace = backup.namespace();
    Ok(pg)
}

/// Builds the restoring cluster for Backup `namespace/backup`; applies it unless `dry_run`.
/// Returns it as YAML.
pub async fn run(
    client: &Client,
    namespace: &str,
    backup: &str,
    new: &str,
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
    let pg = restoring_cluster(&source, &found, new)?;
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
        let pg = restoring_cluster(&source(), &backup("Completed"), "shop-copy").unwrap();
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
        assert!(restoring_cluster(&source(), &backup("Failed"), "copy").is_err());
        assert!(restoring_cluster(&source(), &backup("Completed"), "shop").is_err());
    }
}
