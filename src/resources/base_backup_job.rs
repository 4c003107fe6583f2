//! The Job of a physical Backup: `backup-agent base-backup`, streaming pg_basebackup from a
//! replica (the primary when none is ready) into the bucket, done once the archive holds the
//! backup's WAL (`docs/src/design/pitr.md` §4).
//!
//! It connects as the replication role, as a standby does: its password, and its client
//! certificate when Tusk issued the certificates (`pg_hba` asks for both; `agent_login`). The
//! Job sees only the certificate, key and CA of the server Secret, never the server's own key,
//! and no superuser credential.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::agent::{AgentSettings, backup_job_spec};
use super::agent_login::Login;
use super::pod::plain_env;
use super::{AGENT_CONTAINER, Cluster, Component, has_client_service, wal_archiving};
use crate::crd::{BackupPolicy, ClientService, PostgreSQL};

/// How long the archive may take beyond its own `archive_timeout` to receive the backup's last
/// segment (a backlog draining after an outage).
const WAL_WAIT_MARGIN_SECONDS: i64 = 600;

/// The instance a base backup reads: the first ready replica, else the primary (by the `-rw`
/// Service). A base backup from a standby puts no checkpoint or read load on the primary.
pub fn base_backup_source(pg: &PostgreSQL, cluster: &Cluster) -> String {
    let states = pg.status.as_ref().map(|s| s.instance_states.as_slice());
    states
        .unwrap_or_default()
        .iter()
        .find(|i| i.ready && i.role == "replica")
        .map_or_else(
            || cluster.rw_host(),
            |i| format!("{}.{}", i.pod, cluster.peer_domain()),
        )
}

/// The instance a scheduled base backup reads, fixed in its CronJob: the replicas (`-ro`) when
/// the cluster has any and that Service, else the primary.
pub fn scheduled_base_backup_source(cluster: &Cluster) -> String {
    if cluster.spec.instances > 1 && has_client_service(cluster, ClientService::ReadOnly) {
        format!("{}.{}.svc", cluster.ro_service_name(), cluster.namespace)
    } else {
        cluster.rw_host()
    }
}

/// Job `<backup>` of a physical Backup, owned by that Backup, reading from `source`.
pub fn base_backup_job(
    cluster: &Cluster,
    policy: &BackupPolicy,
    agent: &AgentSettings,
    name: &str,
    owner: OwnerReference,
    source: &str,
) -> Job {
    let mut metadata = cluster.child_meta(name.to_owned(), Component::Backup);
    metadata.owner_references = Some(vec![owner]);
    Job {
        metadata,
        spec: Some(base_backup_job_spec(cluster, policy, agent, source)),
        status: None,
    }
}

/// The spec of a base-backup Job (on demand, or a run of the `<name>-base` CronJob).
pub fn base_backup_job_spec(
    cluster: &Cluster,
    policy: &BackupPolicy,
    agent: &AgentSettings,
    source: &str,
) -> JobSpec {
    let mut spec = backup_job_spec(cluster, policy, agent);
    let archive_timeout = wal_archiving(cluster).map_or(0, |a| i64::from(a.timeout_seconds));
    let wait = 2 * archive_timeout + WAL_WAIT_MARGIN_SECONDS;
    if let Some(pod) = spec.template.spec.as_mut() {
        // backup_job_spec mounted the replication role's certificate (tusk_backup presents it
        // too); the login is the replication role's own.
        let container = pod
            .containers
            .iter_mut()
            .find(|c| c.name == AGENT_CONTAINER);
        if let Some(container) = container {
            container.args = Some(vec!["base-backup".to_owned()]);
            let env = container.env.get_or_insert_with(Vec::new);
            env.retain(|v| !matches!(v.name.as_str(), "PGHOST" | "PGUSER" | "PGPASSWORD"));
            env.push(plain_env("PGHOST", source));
            env.extend(Login::Replication.credentials(cluster));
            env.push(plain_env("TUSK_WAL_WAIT_SECONDS", wait.to_string()));
        }
    }
    spec
}

#[cfg(test)]
#[path = "base_backup_job_tests.rs"]
mod tests;
