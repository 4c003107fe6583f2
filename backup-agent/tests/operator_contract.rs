//! The agent's side of the contract with the operator: run the real agent with exactly the
//! command line and environment of the operator's backup CronJob
//! (`tests/contracts/backup-cronjob.json`, kept current by the operator's `agent_contract`
//! test), resolving Secrets and in-cluster host names to the local services, as a Kubernetes
//! node would. The backup must complete where the operator will look for it.

mod common;

use common::agent::run_ok;
use common::postgres::PgServer;
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
/// The replication role's password, which `tusk_backup` takes.
const MACHINE_PASSWORD: &str = "machine-pw";

/// What the kubelet would put in the environment for one variable of the contract.
fn resolve(var: &Value, store: &TestStore, pg: &PgServer) -> (String, String) {
    let name = var["name"].as_str().expect("env name").to_owned();
    let value = if let Some(secret) = var.get("secretKeyRef") {
        match (secret["name"].as_str(), secret["key"].as_str()) {
            (Some("demo-replication"), Some("password")) => MACHINE_PASSWORD.to_owned(),
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
            // The mounted client certificate: the replication role's, as the server Secret
            // carries it.
            "PGSSLCERT" => pg.dir.path().join("replication.crt").display().to_string(),
            "PGSSLKEY" => pg.dir.path().join("replication.key").display().to_string(),
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
    // What only a reader that bypasses row security and reads large objects can dump.
    pg.psql(
        "app",
        "SET ROLE app_owner;
         CREATE TABLE secrets (owner text, note text);
         INSERT INTO secrets VALUES ('nobody', 'hidden by a policy');
         ALTER TABLE secrets ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
         SELECT lo_from_bytea(0, 'a large object');",
    );
    // The backup logs in as tusk_backup, made as the instance manager makes it.
    let backup = tusk_contract::roles::BACKUP_USER;
    let options = tusk_contract::roles::BACKUP_OPTIONS;
    pg.psql(
        "postgres",
        &format!("CREATE ROLE {backup} {options} PASSWORD '{MACHINE_PASSWORD}'"),
    );
    pg.psql("postgres", "CREATE ROLE tusk_rewind LOGIN");
    for grant in tusk_contract::roles::grants() {
        pg.psql("postgres", &grant);
    }
    // It reads; it never writes.
    let mut write = std::process::Command::new(pg.bin_dir.join("psql"));
    write
        .args([
            "-X",
            "-h",
            "127.0.0.1",
            "-p",
            &pg.port.to_string(),
            "-U",
            backup,
            "-d",
            "app",
        ])
        .args(["-c", "INSERT INTO customers (name) VALUES ('x')"])
        .env("PGPASSWORD", MACHINE_PASSWORD);
    let out = write.output().expect("psql");
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && error.contains("permission denied"),
        "tusk_backup wrote: {error}"
    );
    let contract = contract();
    // The Job runs the agent copied into the cluster's postgres image, by its path there.
    assert_eq!(
        contract["command"],
        serde_json::json!(["/tusk/bin/backup-agent"]),
        "the agent copied into the postgres image"
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
