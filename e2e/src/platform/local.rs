//! e2e/local: the operator is a process managed by e2e/local/operator.sh, pods are kwok's
//! (readiness follows the annotation of e2e/local/stages.yaml), the apiserver's audit log
//! records the operator's requests, and with L4 every database pod has a local PostgreSQL
//! (e2e/local/pg.sh) and the bucket is the local MinIO.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::audit::{self, Write};
use crate::bucket::Damage;
use crate::settings::Settings;
use crate::{Context, Result, bucket, fail, metrics};

/// kwok's Stages turn a pod with this annotation set to "false" unready.
const READY_ANNOTATION: &str = "e2e.tusk.dev/ready";

pub struct Local {
    client: Client,
    dir: PathBuf,
    scripts: PathBuf,
    minio: Option<String>,
}

impl Local {
    pub fn new(client: Client, dir: PathBuf, settings: &Settings) -> Self {
        Local {
            client,
            dir,
            scripts: settings.repo.join("e2e/local"),
            minio: crate::settings::local_minio(),
        }
    }

    async fn operator_sh(&self, command: &str) -> Result<String> {
        run(tokio::process::Command::new(self.scripts.join("operator.sh")).arg(command)).await
    }

    pub async fn operator_kill(&self) -> Result {
        self.operator_sh("kill").await.map(drop)
    }

    pub async fn operator_start(&self) -> Result {
        self.operator_sh("start").await.map(drop)
    }

    pub fn operator_logs(&self) -> Result<String> {
        std::fs::read_to_string(self.dir.join("logs/operator.log"))
            .context("reading the operator log")
    }

    pub async fn operator_metrics(&self) -> Result<String> {
        metrics::get(("127.0.0.1", self.operator_metrics_port()?), "/metrics").await
    }

    /// The loopback port the operator serves /metrics on (e2e/local/operator.sh chose it).
    pub fn operator_metrics_port(&self) -> Result<u16> {
        let port =
            std::fs::read_to_string(self.dir.join("operator.port")).context("operator.port")?;
        port.trim().parse().context("operator.port")
    }

    pub async fn pod_set_ready(&self, ns: &str, pod: &str, ready: bool) -> Result {
        let value = if ready {
            serde_json::Value::Null
        } else {
            "false".into()
        };
        let patch = serde_json::json!({"metadata": {"annotations": {READY_ANNOTATION: value}}});
        Api::<Pod>::namespaced(self.client.clone(), ns)
            .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    fn audit_log(&self) -> PathBuf {
        self.dir.join("logs/audit.log")
    }

    pub fn operator_writes_mark(&self) -> Result<u64> {
        audit::mark(&self.audit_log())
    }

    pub fn operator_writes_since(&self, mark: u64) -> Result<Vec<Write>> {
        audit::writes_since(&self.audit_log(), mark)
    }

    /// psql through e2e/local/pg.sh (the job runner's PostgreSQL for the cluster).
    pub async fn db_sql(
        &self,
        ns: &str,
        cluster: &str,
        db: Option<&str>,
        sql: &str,
        as_app: bool,
    ) -> Result<String> {
        let mut command = tokio::process::Command::new(self.scripts.join("pg.sh"));
        command.args([ns, cluster, "-A", "-t", "-q"]);
        if let Some(db) = db {
            command.args(["-d", db]);
        }
        command.args(["-c", sql]);
        if as_app {
            command.env("TUSK_PG_SECRET", "app");
        }
        run(&mut command).await
    }

    pub async fn bucket_keys(&self, prefix: &str) -> Result<Vec<String>> {
        let Some(endpoint) = &self.minio else {
            fail!("no local MinIO (TUSK_E2E_MINIO_ENDPOINT is not set: TUSK_E2E_L4=1 starts it)");
        };
        bucket::keys(endpoint, prefix).await
    }

    pub async fn bucket_damage(&self, key: &str, damage: Damage<'_>) -> Result {
        let Some(endpoint) = &self.minio else {
            fail!("no local MinIO (TUSK_E2E_MINIO_ENDPOINT is not set: TUSK_E2E_L4=1 starts it)");
        };
        bucket::damage(endpoint, key, damage).await
    }
}

/// Runs a command; its stdout, or a failure quoting its stderr.
pub(crate) async fn run(command: &mut tokio::process::Command) -> Result<String> {
    let what = format!("{:?}", command.as_std());
    let out = command.output().await.context(format!("running {what}"))?;
    if !out.status.success() {
        fail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
