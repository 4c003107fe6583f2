//! The scheduled-backup CronJobs: `<name>-backup` (logical) and, with `walArchive`,
//! `<name>-base` (base backups). Their Jobs are the same as on-demand backup Jobs.

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::agent::{AgentSettings, backup_job_spec};
use super::base_backup_job::{base_backup_job_spec, scheduled_base_backup_source};
use super::{Cluster, Component, base_backup_cronjob_name, wal_archiving};
use crate::crd::BackupPolicy;

/// CronJob `<name>-backup`. `ready` is the cluster's Ready condition: while it is false the
/// CronJob is suspended, so no backup ever starts against a database that is not serving.
pub fn backup_cronjob(
    cluster: &Cluster,
    policy: &BackupPolicy,
    agent: &AgentSettings,
    ready: bool,
) -> CronJob {
    let job = backup_job_spec(cluster, policy, agent);
    let schedule = policy.schedule.clone();
    cronjob(
        cluster,
        cluster.cronjob_name(),
        schedule,
        policy,
        job,
        ready,
    )
}

/// CronJob `<name>-base`, with `walArchive` only: base backups on `baseBackupSchedule`
/// (`schedule` when unset), from the replicas when there are any. Suspended like the other.
pub fn base_backup_cronjob(
    cluster: &Cluster,
    policy: &BackupPolicy,
    agent: &AgentSettings,
    ready: bool,
) -> Option<CronJob> {
    let archive = policy.wal_archive.as_ref()?;
    wal_archiving(cluster)?;
    let source = scheduled_base_backup_source(cluster);
    let job = base_backup_job_spec(cluster, policy, agent, &source);
    let schedule =
        (archive.base_backup_schedule.clone()).unwrap_or_else(|| policy.schedule.clone());
    let name = base_backup_cronjob_name(cluster.name);
    Some(cronjob(cluster, name, schedule, policy, job, ready))
}

fn cronjob(
    cluster: &Cluster,
    name: String,
    schedule: String,
    policy: &BackupPolicy,
    job: JobSpec,
    ready: bool,
) -> CronJob {
    let labels = cluster.labels(Component::Backup);
    CronJob {
        metadata: cluster.child_meta(name, Component::Backup),
        spec: CronJobSpec {
            schedule,
            time_zone: Some("Etc/UTC".to_owned()),
            suspend: Some(policy.suspend || !ready),
            concurrency_policy: Some("Forbid".to_owned()),
            starting_deadline_seconds: Some(600),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(job),
            },
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;
    use k8s_openapi::api::core::v1::EnvVar;

    fn build(spec: &str, ready: bool) -> CronJob {
        let pg = postgresql(spec);
        let cluster = Cluster::new(&pg).unwrap();
        let agent = AgentSettings {
            image: "ghcr.io/tusk/backup-agent:test".into(),
        };
        backup_cronjob(&cluster, pg.spec.backup.as_ref().unwrap(), &agent, ready)
    }

    fn env_of(cj: &CronJob) -> Vec<EnvVar> {
        let job = cj.spec.job_template.spec.as_ref().unwrap();
        job.template.spec.as_ref().unwrap().containers[0]
            .env
            .clone()
            .unwrap()
    }

    fn value<'a>(env: &'a [EnvVar], name: &str) -> Option<&'a str> {
        env.iter().find(|e| e.name == name)?.value.as_deref()
    }

    #[test]
    fn suspended_until_ready_and_never_concurrent() {
        let spec = build(WITH_S3_BACKUP, false).spec;
        assert_eq!(spec.suspend, Some(true));
        assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
        assert_eq!(spec.schedule, "0 2 * * *");
        assert_eq!(build(WITH_S3_BACKUP, true).spec.suspend, Some(false));
    }

    #[test]
    fn user_suspend_wins_over_ready() {
        let spec = format!("{WITH_S3_BACKUP}  suspend: true\n");
        assert_eq!(build(&spec, true).spec.suspend, Some(true));
    }

    #[test]
    fn runs_agent_backup_against_the_rw_service_with_the_destination() {
        let spec = WITH_S3_BACKUP.replace("bucket: backups", "bucket: backups\n      path: tusk");
        let cj = build(&spec, true);
        assert_eq!(cj.metadata.name.as_deref(), Some("demo-backup"));
        let job = cj.spec.job_template.spec.as_ref().unwrap();
        let container = &job.template.spec.as_ref().unwrap().containers[0];
        assert_eq!(container.args.as_deref(), Some(&["backup".to_owned()][..]));
        // The server's own pg_dump: the cluster's image, the agent copied in.
        assert_eq!(
            container.image.as_deref(),
            Some("docker.io/library/postgres:18")
        );
        let pod = job.template.spec.as_ref().unwrap();
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(
            init.image.as_deref(),
            Some("ghcr.io/tusk/backup-agent:test")
        );
        let env = env_of(&cj);
        assert_eq!(value(&env, "PGHOST"), Some("demo-rw.prod.svc"));
        assert_eq!(value(&env, "TUSK_STORE"), Some("s3"));
        assert_eq!(value(&env, "TUSK_BUCKET"), Some("backups"));
        assert_eq!(value(&env, "TUSK_PATH"), Some("tusk"));
        assert_eq!(
            value(&env, "TUSK_S3_ENDPOINT"),
            Some("http://minio.minio.svc:9000")
        );
        assert_eq!(value(&env, "TUSK_S3_FORCE_PATH_STYLE"), Some("true"));
        assert_eq!(value(&env, "TUSK_COMPRESSION"), Some("zstd"));
        assert_eq!(value(&env, "TUSK_NAMESPACE"), Some("prod"));
        assert_eq!(value(&env, "TUSK_CLUSTER"), Some("demo"));
    }

    #[test]
    fn the_backup_verifies_the_server_with_only_the_ca_certificate_mounted() {
        let cj = build(WITH_S3_BACKUP, true);
        let env = env_of(&cj);
        assert_eq!(value(&env, "PGSSLMODE"), Some("verify-full"));
        let root = value(&env, "PGSSLROOTCERT").expect("PGSSLROOTCERT");
        let pod = (cj.spec.job_template.spec.as_ref())
            .and_then(|j| j.template.spec.as_ref())
            .unwrap();
        let mount = (pod.containers[0].volume_mounts.iter().flatten())
            .find(|m| root.starts_with(&format!("{}/", m.mount_path)))
            .expect("the CA's directory is mounted");
        let volume = (pod.volumes.iter().flatten())
            .find(|v| v.name == mount.name)
            .unwrap();
        let secret = volume.secret.as_ref().expect("a Secret volume");
        assert_eq!(secret.secret_name.as_deref(), Some("demo-server-tls"));
        // ca.crt alone: the server's key never reaches a Job.
        let keys: Vec<&str> = (secret.items.iter().flatten())
            .map(|i| i.key.as_str())
            .collect();
        assert_eq!(keys, ["ca.crt"]);
        assert_eq!(mount.read_only, Some(true));
    }

    #[test]
    fn the_agents_reason_reaches_the_pod_status() {
        let cj = build(WITH_S3_BACKUP, true);
        let job = cj.spec.job_template.spec.as_ref().unwrap();
        let container = &job.template.spec.as_ref().unwrap().containers[0];
        assert_eq!(container.name, crate::resources::AGENT_CONTAINER);
        let path = container.termination_message_path.as_deref();
        assert_eq!(path, Some("/dev/termination-log"));
        assert_eq!(value(&env_of(&cj), "TUSK_TERMINATION_LOG"), path);
        assert_eq!(
            container.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
    }

    #[test]
    fn credentials_are_secret_refs_never_literals() {
        let env = env_of(&build(WITH_S3_BACKUP, true));
        for (name, secret, key) in [
            ("AWS_ACCESS_KEY_ID", "minio-creds", "access-key"),
            ("AWS_SECRET_ACCESS_KEY", "minio-creds", "secret-key"),
            ("PGPASSWORD", "demo-replication", "password"),
        ] {
            let var = env.iter().find(|e| e.name == name).unwrap();
            assert_eq!(var.value, None, "{name} must not be a literal");
            let selector = var
                .value_from
                .as_ref()
                .unwrap()
                .secret_key_ref
                .as_ref()
                .unwrap();
            assert_eq!(
                (selector.name.as_str(), selector.key.as_str()),
                (secret, key)
            );
        }
    }

    #[test]
    fn gcs_key_is_mounted_as_a_file() {
        let spec = r#"
storage: {size: 1Gi}
backup:
  schedule: "@daily"
  compression: gzip
  destination:
    gcs:
      bucket: my-backups
      credentials: {serviceAccountKey: {name: gcs, key: key.json}}
"#;
        let cj = build(spec, true);
        let env = env_of(&cj);
        assert_eq!(value(&env, "TUSK_STORE"), Some("gcs"));
        assert_eq!(value(&env, "TUSK_COMPRESSION"), Some("gzip"));
        assert_eq!(
            value(&env, "GOOGLE_APPLICATION_CREDENTIALS"),
            Some("/var/run/secrets/tusk/gcs/key.json")
        );
        let job = cj.spec.job_template.spec.unwrap();
        let volumes = job.template.spec.unwrap().volumes.unwrap();
        let key = volumes.iter().find(|v| v.name == "gcs-key").unwrap();
        assert_eq!(
            key.secret.as_ref().unwrap().secret_name.as_deref(),
            Some("gcs")
        );
    }

    fn base(spec: &str, ready: bool) -> Option<CronJob> {
        let pg = postgresql(spec);
        let cluster = Cluster::new(&pg).unwrap();
        let agent = AgentSettings {
            image: "ghcr.io/tusk/backup-agent:test".into(),
        };
        base_backup_cronjob(&cluster, pg.spec.backup.as_ref().unwrap(), &agent, ready)
    }

    #[test]
    fn base_backups_are_scheduled_only_for_a_cluster_that_archives() {
        assert!(base(WITH_S3_BACKUP, true).is_none());
        let archiving = WITH_S3_BACKUP.replace("backup:\n", "backup:\n  walArchive: {}\n");
        let cj = base(&archiving, true).expect("a base-backup CronJob");
        assert_eq!(cj.metadata.name.as_deref(), Some("demo-base"));
        assert_eq!(cj.spec.schedule, "0 2 * * *", "the cluster's schedule");
        assert_eq!(cj.spec.suspend, Some(false));
        assert_eq!(cj.spec.concurrency_policy.as_deref(), Some("Forbid"));
        let job = cj.spec.job_template.spec.as_ref().unwrap();
        let container = &job.template.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            container.args.as_deref(),
            Some(&["base-backup".to_owned()][..])
        );
        let env = env_of(&cj);
        assert_eq!(
            value(&env, "PGHOST"),
            Some("demo-rw.prod.svc"),
            "one instance"
        );
        let user = env.iter().find(|e| e.name == "PGUSER").unwrap();
        let secret = user
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(secret.name, "demo-replication");
        assert_eq!(base(&archiving, false).unwrap().spec.suspend, Some(true));
    }

    #[test]
    fn base_backups_read_the_replicas_on_their_own_schedule() {
        let spec = WITH_S3_BACKUP.replace(
            "backup:\n",
            "instances: 3\nbackup:\n  walArchive: {baseBackupSchedule: \"@weekly\"}\n",
        );
        let cj = base(&spec, true).expect("a base-backup CronJob");
        assert_eq!(cj.spec.schedule, "@weekly");
        assert_eq!(value(&env_of(&cj), "PGHOST"), Some("demo-ro.prod.svc"));
    }
}
