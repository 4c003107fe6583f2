//! The agent's side of the contract with the operator: run the real agent with exactly the
//! command line and environment of the operator's backup CronJob
//! (`tests/contracts/backup-cronjob.json`, kept current by the operator's `agent_contract`
//! test), resolving Secrets and in-cluster host names to the local services, as a Kubernetes
//! node would. The backup must complete where the operator will look for it.

mod common;

use common::agent::run_ok;
use common::postgres::{PASSWORD, PgServer};
use common::stores::{Kind, TestStore};
use common::{minio, seed};
use serde_json::Value;

const JOB_NAME: &str = "demo-backup-29412345";

fn contract() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/contracts/backup-cronjob.json"
    );
    let text = std::fs::read_to_string(path).expect("the operator's contract file");
    serde_json::from_str(&text).expect("contract is JSON")
}

const JOB_UID: &str = "5b0e-job-uid";

/// What the kubelet would put in the environment for one variable of the contract.
fn resolve(var: &Value, store: &TestStore, pg: &PgServer) -> (String, String) {
    let name = var["name"].as_str().expect("env name").to_owned();
    let value = if let Some(secret) = var.get("secretKeyRef") {
        match (secret["name"].as_str(), secret["key"].as_str()) {
            (Some("demo-superuser"), Some("username")) => "postgres".to_owned(),
            (Some("demo-superuser"), Some("password")) => PASSWORD.to_owned(),
            (Some("minio-credentials"), Some("access-key")) => minio::ACCESS_KEY.to_owned(),
            (Some("minio-credentials"), Some("secret-key")) => minio::SECRET_KEY.to_owned(),
            other => panic!("the contract references an unknown Secret key {other:?}"),
        }
    } else if let Some(field) = var.get("fieldRef") {
        match field.as_str() {
            Some("metadata.labels['batch.kubernetes.io/job-name']") => JOB_NAME.to_owned(),
            // The Job controller labels its pods with the Job's uid.
            Some("metadata.labels['batch.kubernetes.io/controller-uid']") => JOB_UID.to_owned(),
            other => panic!("the contract references an unknown field {other:?}"),
        }
    } else {
        let value = var["value"].as_str().expect("literal value").to_owned();
        // In-cluster DNS names become the local services.
        match name.as_str() {
            "PGHOST" => "127.0.0.1".to_owned(),
            "PGPORT" => pg.port.to_string(),
            // The mounted CA: the test server's (its certificate names 127.0.0.1).
            "PGSSLROOTCERT" => pg.ca.display().to_string(),
            "TUSK_S3_ENDPOINT" => store.endpoint().to_owned(),
            _ => value,
        }
    };
    (name, value)
}

#[tokio::test]
async fn the_operators_backup_job_produces_a_complete_backup() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    seed::seed(&pg);
    let contract = contract();
    assert!(
        contract["command"].is_null(),
        "the image's entrypoint is the agent"
    );

    let mut cmd = common::agent::bare_agent();
    cmd.env("AWS_EC2_METADATA_DISABLED", "true");
    for var in contract["env"].as_array().expect("env list") {
        let (name, value) = resolve(var, &store, &pg);
        cmd.env(name, value);
    }
    for arg in contract["args"].as_array().expect("args list") {
        cmd.arg(arg.as_str().expect("string arg"));
    }

    let details = run_ok(cmd);
    assert_eq!(details["backupId"], JOB_NAME);
    let prefix = format!("clusters/prod/demo/{JOB_NAME}/");
    let keys = store.keys(&prefix).await;
    assert!(
        keys.contains(&format!("{prefix}manifest.json")),
        "no manifest under {prefix}: {keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.ends_with(".zst")),
        "zstd files: {keys:?}"
    );
}
