//! The operator's side of the contract with backup-agent: the command line and environment of
//! the backup CronJob's container, written to `tests/contracts/backup-cronjob.json`.
//!
//! backup-agent's own test `operator_contract.rs` runs the real agent with exactly this command
//! line and environment (host names and Secrets resolved to local services) and checks that a
//! complete backup lands where the operator will look for it. A change to either side that
//! breaks the other fails one of the two tests. Regenerate with `UPDATE_CONTRACTS=1 cargo test`.

use std::path::Path;

use serde_json::{Value, json};
use tusk::PostgreSQL;
use tusk::resources::{AgentSettings, Cluster, backup_cronjob};

const SPEC: &str = r#"
storage: {size: 1Gi}
backup:
  schedule: "0 2 * * *"
  compression: zstd
  destination:
    s3:
      bucket: tusk-backups
      path: clusters
      endpoint: http://minio.minio.svc.cluster.local:9000
      forcePathStyle: true
      credentials:
        accessKeyId: {name: minio-credentials, key: access-key}
        secretAccessKey: {name: minio-credentials, key: secret-key}
"#;

fn contract() -> Value {
    let spec: Value = serde_saphyr::from_str(SPEC).expect("spec is YAML");
    let pg: PostgreSQL = serde_json::from_value(json!({
        "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
        "metadata": {"name": "demo", "namespace": "prod", "uid": "c0ffee"},
        "spec": spec,
    }))
    .expect("spec matches the API");
    let cluster = Cluster::new(&pg).expect("complete cluster");
    let agent = AgentSettings {
        image: "backup-agent:contract".to_owned(),
    };
    let policy = pg.spec.backup.as_ref().expect("backup policy");
    let cronjob = backup_cronjob(&cluster, policy, &agent, true);
    let job = cronjob.spec.job_template.spec.expect("job spec");
    let container = &job.template.spec.expect("pod spec").containers[0];
    let env: Vec<Value> = container
        .env
        .iter()
        .flatten()
        .map(|var| {
            let source = var.value_from.as_ref();
            if let Some(secret) = source.and_then(|s| s.secret_key_ref.as_ref()) {
                json!({"name": var.name, "secretKeyRef": {"name": secret.name, "key": secret.key}})
            } else if let Some(field) = source.and_then(|s| s.field_ref.as_ref()) {
                json!({"name": var.name, "fieldRef": field.field_path})
            } else {
                json!({"name": var.name, "value": var.value})
            }
        })
        .collect();
    json!({"command": container.command, "args": container.args, "env": env})
}

#[test]
fn backup_cronjob_contract_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/contracts/backup-cronjob.json");
    let current = serde_json::to_string_pretty(&contract()).expect("JSON") + "\n";
    if std::env::var_os("UPDATE_CONTRACTS").is_some() {
        std::fs::write(&path, &current).expect("write the contract");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        committed,
        current,
        "{} is stale: rerun with UPDATE_CONTRACTS=1 and check backup-agent's operator_contract test",
        path.display()
    );
}
