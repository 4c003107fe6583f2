//! The scheduled-backup CronJob, and the environment every backup-agent container gets (also
//! used for on-demand and restore Jobs).

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec,
    PodTemplateSpec, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::pod::{plain_env, restricted_container_security, restricted_pod_security, secret_env};
use super::{Cluster, Component, POSTGRES_PORT};
use crate::crd::{BackupPolicy, Destination, SecretKeyRef};

/// Where a GCS service-account key is mounted in agent pods.
const GCS_KEY_DIR: &str = "/var/run/secrets/tusk/gcs";
/// The unprivileged user of the backup-agent image.
const AGENT_UID: i64 = 65532;

/// Operator-wide settings for the pods that run the backup agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSettings {
    /// The backup-agent container image.
    pub image: String,
}

/// What the agent needs in its environment: where to connect and where to write. Credentials
/// are always `secretKeyRef`s, never literals.
pub fn agent_environment(
    cluster: &Cluster,
    destination: &Destination,
) -> (Vec<EnvVar>, Vec<Volume>, Vec<VolumeMount>) {
    let mut env = vec![
        plain_env("TUSK_NAMESPACE", cluster.namespace),
        plain_env("TUSK_CLUSTER", cluster.name),
        plain_env("TUSK_LOG_FORMAT", "json"),
        plain_env("PGHOST", cluster.rw_host()),
        plain_env("PGPORT", POSTGRES_PORT.to_string()),
        secret_env("PGUSER", &cluster.superuser_secret_name(), "username"),
        secret_env("PGPASSWORD", &cluster.superuser_secret_name(), "password"),
    ];
    let (mut volumes, mut mounts) = (Vec::new(), Vec::new());
    if let Some(s3) = &destination.s3 {
        env.push(plain_env("TUSK_STORE", "s3"));
        env.push(plain_env("TUSK_BUCKET", &s3.bucket));
        if !s3.path.is_empty() {
            env.push(plain_env("TUSK_PATH", &s3.path));
        }
        if let Some(endpoint) = &s3.endpoint {
            env.push(plain_env("TUSK_S3_ENDPOINT", endpoint));
        }
        env.push(plain_env("TUSK_S3_REGION", &s3.region));
        env.push(plain_env(
            "TUSK_S3_FORCE_PATH_STYLE",
            s3.force_path_style.to_string(),
        ));
        if let Some(credentials) = &s3.credentials {
            env.push(secret_ref("AWS_ACCESS_KEY_ID", &credentials.access_key_id));
            env.push(secret_ref(
                "AWS_SECRET_ACCESS_KEY",
                &credentials.secret_access_key,
            ));
        }
    } else if let Some(gcs) = &destination.gcs {
        env.push(plain_env("TUSK_STORE", "gcs"));
        env.push(plain_env("TUSK_BUCKET", &gcs.bucket));
        if !gcs.path.is_empty() {
            env.push(plain_env("TUSK_PATH", &gcs.path));
        }
        if let Some(credentials) = &gcs.credentials {
            let key = &credentials.service_account_key;
            env.push(plain_env(
                "GOOGLE_APPLICATION_CREDENTIALS",
                format!("{GCS_KEY_DIR}/key.json"),
            ));
            volumes.push(Volume {
                name: "gcs-key".to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(key.name.clone()),
                    items: Some(vec![k8s_openapi::api::core::v1::KeyToPath {
                        key: key.key.clone(),
                        path: "key.json".to_owned(),
                        ..Default::default()
                    }]),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            });
            mounts.push(VolumeMount {
                name: "gcs-key".to_owned(),
                mount_path: GCS_KEY_DIR.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
        }
    }
    (env, volumes, mounts)
}

/// CronJob `<name>-backup`. `ready` is the cluster's Ready condition: while it is false the
/// CronJob is suspended, so no backup ever starts against a database that is not serving.
pub fn backup_cronjob(
    cluster: &Cluster,
    policy: &BackupPolicy,
    agent: &AgentSettings,
    ready: bool,
) -> CronJob {
    let (mut env, mut volumes, mut mounts) = agent_environment(cluster, &policy.destination);
    env.push(plain_env("TUSK_COMPRESSION", policy.compression.as_str()));
    // The Job's name (`<name>-backup-<minutes since epoch>`) is the backup id, so the operator
    // can find the objects a Job wrote without any other bookkeeping.
    env.push(EnvVar {
        name: "TUSK_BACKUP_ID".to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.labels['batch.kubernetes.io/job-name']".to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    });
    volumes.push(Volume {
        name: "tmp".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    });
    mounts.push(VolumeMount {
        name: "tmp".to_owned(),
        mount_path: "/tmp".to_owned(),
        ..VolumeMount::default()
    });
    let labels = cluster.labels(Component::Backup);
    let container = Container {
        name: "backup-agent".to_owned(),
        image: Some(agent.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: Some(vec!["backup".to_owned()]),
        env: Some(env),
        volume_mounts: Some(mounts),
        security_context: Some(restricted_container_security()),
        ..Container::default()
    };
    CronJob {
        metadata: cluster.child_meta(cluster.cronjob_name(), Component::Backup),
        spec: CronJobSpec {
            schedule: policy.schedule.clone(),
            time_zone: Some("Etc/UTC".to_owned()),
            suspend: Some(policy.suspend || !ready),
            concurrency_policy: Some("Forbid".to_owned()),
            starting_deadline_seconds: Some(600),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(JobSpec {
                    backoff_limit: Some(2),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(labels),
                            ..ObjectMeta::default()
                        }),
                        spec: Some(PodSpec {
                            containers: vec![container],
                            restart_policy: Some("Never".to_owned()),
                            automount_service_account_token: Some(false),
                            enable_service_links: Some(false),
                            security_context: Some(restricted_pod_security(AGENT_UID, false)),
                            volumes: Some(volumes),
                            ..PodSpec::default()
                        }),
                    },
                    ..JobSpec::default()
                }),
            },
        },
        status: None,
    }
}

/// An environment variable read from a user-named Secret key.
fn secret_ref(name: &str, source: &SecretKeyRef) -> EnvVar {
    secret_env(name, &source.name, &source.key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

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
        let cj = build(WITH_S3_BACKUP, true);
        assert_eq!(cj.metadata.name.as_deref(), Some("demo-backup"));
        let job = cj.spec.job_template.spec.as_ref().unwrap();
        let container = &job.template.spec.as_ref().unwrap().containers[0];
        assert_eq!(container.args.as_deref(), Some(&["backup".to_owned()][..]));
        assert_eq!(
            container.image.as_deref(),
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
    fn credentials_are_secret_refs_never_literals() {
        let env = env_of(&build(WITH_S3_BACKUP, true));
        for (name, secret, key) in [
            ("AWS_ACCESS_KEY_ID", "minio-creds", "access-key"),
            ("AWS_SECRET_ACCESS_KEY", "minio-creds", "secret-key"),
            ("PGPASSWORD", "demo-superuser", "password"),
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
}
