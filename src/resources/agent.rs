//! The pods that run the backup agent: one environment contract and one pod shape, shared by the
//! scheduled CronJob, on-demand backup Jobs and restore Jobs.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, KeyToPath, PodSpec,
    PodTemplateSpec, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::agent_login::Login;
use super::pod::{
    AGENT_UID, plain_env, pod_label_env, restricted_container_security, restricted_pod_security,
    secret_env,
};
use super::tls::CA_CRT;
use super::{Cluster, Component, POSTGRES_PORT};
use crate::crd::{BackupPolicy, Destination, SecretKeyRef};
use tusk_contract::roles::{BACKUP_USER, REPLICATION_USER, REWIND_USER};

/// The `<namespace>/<cluster>` segments of a backup prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub namespace: String,
    pub cluster: String,
}

impl Layout {
    /// The prefix a cluster writes its own backups under.
    pub fn of(cluster: &Cluster) -> Self {
        Self {
            namespace: cluster.namespace.to_owned(),
            cluster: cluster.name.to_owned(),
        }
    }
}

/// What a restore Job restores: a backup id (or `latest`) under `layout` in `destination`.
#[derive(Clone, Debug, PartialEq)]
pub struct RestorePlan {
    pub destination: Destination,
    pub layout: Layout,
    pub backup_id: String,
}

/// Where a GCS service-account key is mounted in agent pods.
const GCS_KEY_DIR: &str = "/var/run/secrets/tusk/gcs";
/// The volume of the GCS key file (the Jobs'; the instance manager gets the key in its
/// environment instead).
pub const GCS_KEY_VOLUME: &str = "gcs-key";
/// Where the cluster's CA certificate (which signed its server certificate) is mounted in agent
/// pods that connect to the cluster.
const SERVER_CA_DIR: &str = "/var/run/secrets/tusk/postgres-ca";
/// Where an S3 endpoint's private CA bundle is mounted in agent pods.
const CA_BUNDLE_DIR: &str = "/var/run/secrets/tusk/ca";
/// `spec.backup.jobDeadlineSeconds` when unset: long enough for large dumps, short enough that a
/// stuck Job (a missing Secret key, a lock, a stalled upload) ends before the next nightly run.
pub const DEFAULT_BACKUP_DEADLINE_SECONDS: i64 = 6 * 3600;
/// `spec.restore.jobDeadlineSeconds` when unset: restores rebuild indexes, so they get longer.
pub const DEFAULT_RESTORE_DEADLINE_SECONDS: i64 = 12 * 3600;
/// The agent's container in every agent pod; the operator reads its termination message.
pub const AGENT_CONTAINER: &str = "backup-agent";
/// Where the agent writes its one-line reason when it fails (the kubelet's default path).
const TERMINATION_LOG: &str = "/dev/termination-log";

/// Operator-wide settings for the pods that run the backup agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSettings {
    /// The backup-agent container image.
    pub image: String,
}

/// What the agent needs in its environment: where to connect and where to write. Credentials
/// are always `secretKeyRef`s, never literals.
/// `layout` names the prefix (`<namespace>/<cluster>`) the agent reads or writes: this cluster's
/// own for backups, the source cluster's for a restore.
pub fn agent_environment(
    cluster: &Cluster,
    layout: &Layout,
    destination: &Destination,
    login: Login,
) -> (Vec<EnvVar>, Vec<Volume>, Vec<VolumeMount>) {
    let (mut env, mut volumes, mut mounts) = store_environment(layout, destination);
    let [user, password] = login.credentials(cluster);
    // After the cluster's identity, before the store: the order the pinned contract records.
    env.splice(
        3..3,
        [
            plain_env("PGHOST", cluster.rw_host()),
            plain_env("PGPORT", POSTGRES_PORT.to_string()),
            user,
            password,
            // The server is verified against the cluster's CA and by the name in PGHOST, with
            // channel binding: the password goes to no one else.
            plain_env("PGSSLMODE", "verify-full"),
            plain_env("PGSSLROOTCERT", format!("{SERVER_CA_DIR}/ca.crt")),
        ],
    );
    // Only the CA certificate of the server Secret: the Job never sees the server's key.
    let ca = SecretKeyRef {
        name: cluster.server_tls_secret_name(),
        key: CA_CRT.to_owned(),
    };
    let (volume, mount) = key_file(
        "server-ca",
        SERVER_CA_DIR,
        "ca.crt",
        FileSource::Secret(&ca),
    );
    volumes.push(volume);
    mounts.push(mount);
    (env, volumes, mounts)
}

/// The agent's identity and bucket settings without any connection to the cluster's server:
/// what a verification Job gets (it restores into a server of its own).
pub fn store_environment(
    layout: &Layout,
    destination: &Destination,
) -> (Vec<EnvVar>, Vec<Volume>, Vec<VolumeMount>) {
    let mut env = vec![
        plain_env("TUSK_NAMESPACE", &layout.namespace),
        plain_env("TUSK_CLUSTER", &layout.cluster),
        plain_env("TUSK_LOG_FORMAT", "json"),
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
        if let Some(bundle) = &s3.ca_bundle {
            let source = match (&bundle.secret_key_ref, &bundle.config_map_key_ref) {
                (Some(key), _) => Some(FileSource::Secret(key)),
                (None, Some(key)) => Some(FileSource::ConfigMap(key)),
                // CEL refuses a bundle without a source; nothing to mount.
                (None, None) => None,
            };
            if let Some(source) = source {
                env.push(plain_env(
                    "TUSK_S3_CA_BUNDLE",
                    format!("{CA_BUNDLE_DIR}/ca.crt"),
                ));
                let (volume, mount) = key_file("ca-bundle", CA_BUNDLE_DIR, "ca.crt", source);
                volumes.push(volume);
                mounts.push(mount);
            }
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
            let (volume, mount) = key_file(
                GCS_KEY_VOLUME,
                GCS_KEY_DIR,
                "key.json",
                FileSource::Secret(key),
            );
            volumes.push(volume);
            mounts.push(mount);
        }
    }
    (env, volumes, mounts)
}

/// Where a file mounted into agent pods comes from.
enum FileSource<'a> {
    Secret(&'a SecretKeyRef),
    ConfigMap(&'a SecretKeyRef),
}

/// Volume `name` holding one key of `source` as `dir/file`, and its read-only mount.
fn key_file(name: &str, dir: &str, file: &str, source: FileSource<'_>) -> (Volume, VolumeMount) {
    let item = |key: &SecretKeyRef| {
        Some(vec![KeyToPath {
            key: key.key.clone(),
            path: file.to_owned(),
            ..KeyToPath::default()
        }])
    };
    let mut volume = Volume {
        name: name.to_owned(),
        ..Volume::default()
    };
    match source {
        FileSource::Secret(key) => {
            volume.secret = Some(SecretVolumeSource {
                secret_name: Some(key.name.clone()),
                items: item(key),
                ..SecretVolumeSource::default()
            });
        }
        FileSource::ConfigMap(key) => {
            volume.config_map = Some(ConfigMapVolumeSource {
                name: key.name.clone(),
                items: item(key),
                ..ConfigMapVolumeSource::default()
            });
        }
    }
    let mount = VolumeMount {
        name: name.to_owned(),
        mount_path: dir.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    (volume, mount)
}

/// The Job of one backup run, from the CronJob or for an on-demand Backup. The Job's name is
/// the backup id (read through the downward API), so a Job's objects are found without any
/// other bookkeeping.
pub fn backup_job_spec(cluster: &Cluster, policy: &BackupPolicy, agent: &AgentSettings) -> JobSpec {
    let (mut env, volumes, mounts) = agent_environment(
        cluster,
        &Layout::of(cluster),
        &policy.destination,
        Login::Backup,
    );
    env.push(plain_env("TUSK_COMPRESSION", policy.compression.as_str()));
    env.push(pod_label_env(
        "TUSK_BACKUP_ID",
        "batch.kubernetes.io/job-name",
    ));
    // Who owns what this Job writes: the manifest records it, and retention and the Delete
    // finalizer delete only what this uid wrote (a re-created cluster, or the same cluster in
    // another Kubernetes cluster, shares the prefix but not the uid).
    env.push(plain_env("TUSK_CLUSTER_UID", cluster.uid()));
    // The Job's uid, the same in every retry pod of this Job: a retried pod takes over its own
    // claim of the backup id, any other writer of the id fails.
    env.push(pod_label_env(
        "TUSK_WRITER_ID",
        "batch.kubernetes.io/controller-uid",
    ));
    let pod = AgentPod {
        args: vec!["backup".to_owned()],
        env,
        volumes,
        mounts,
        component: Component::Backup,
    };
    let deadline = policy
        .job_deadline_seconds
        .unwrap_or(DEFAULT_BACKUP_DEADLINE_SECONDS);
    // Two retries: a backup that failed half-way left no manifest, so retrying is safe.
    let mut spec = job_spec(cluster, agent, pod, 2, deadline);
    if let Some(pod) = spec.template.spec.as_mut() {
        Login::Backup.present_certificate(cluster, pod);
    }
    // pg_dump and pg_basebackup of the server's own major (`server_tools`).
    super::server_tools::in_postgres_image(cluster, agent, &mut spec);
    spec
}

/// Job `<backup>` for an on-demand Backup, owned by that Backup.
pub fn backup_job(
    cluster: &Cluster,
    policy: &BackupPolicy,
    agent: &AgentSettings,
    name: &str,
    owner: OwnerReference,
) -> Job {
    let mut metadata = cluster.child_meta(name.to_owned(), Component::Backup);
    metadata.owner_references = Some(vec![owner]);
    Job {
        metadata,
        spec: Some(backup_job_spec(cluster, policy, agent)),
        status: None,
    }
}

/// Job `<name>-restore`: `backup-agent restore` into this cluster. The app owner's role is
/// preserved, so the passwords in this cluster's Secrets stay valid after the restore.
pub fn restore_job(cluster: &Cluster, plan: &RestorePlan, agent: &AgentSettings) -> Job {
    let (mut env, volumes, mounts) =
        agent_environment(cluster, &plan.layout, &plan.destination, Login::Superuser);
    // The `-rw` Service routes no one until the restore is done; the Job goes to the pod itself.
    for var in env.iter_mut().filter(|v| v.name == "PGHOST") {
        var.value = Some(cluster.primary_host());
    }
    env.push(plain_env("TUSK_BACKUP_ID", &plan.backup_id));
    env.push(plain_env("TUSK_WORK_DIR", "/tmp"));
    let pod = AgentPod {
        args: std::iter::once("restore".to_owned())
            .chain(restore_preserves(cluster).flat_map(|r| ["--preserve-role".to_owned(), r]))
            .collect(),
        env,
        volumes,
        mounts,
        component: Component::Restore,
    };
    let deadline = restore_deadline_seconds(cluster);
    // No retries: a failed restore is reported and waits for the user (see the README).
    let mut spec = job_spec(cluster, agent, pod, 0, deadline);
    if let Some(pod) = spec.template.spec.as_mut() {
        Login::Superuser.present_certificate(cluster, pod);
    }
    // pg_restore of this cluster's major: it reads archives of the same or an older pg_dump,
    // and writes nothing this server refuses (`server_tools`).
    super::server_tools::in_postgres_image(cluster, agent, &mut spec);
    Job {
        metadata: cluster.child_meta(cluster.restore_job_name(), Component::Restore),
        spec: Some(spec),
        status: None,
    }
}

/// The roles a restore leaves as this cluster made them (the backup's globals would give them
/// the source's passwords): the app owner, whose Secret applications read, and the roles the
/// instance managers and backups log in as (a source's `tusk_replication` password once broke
/// the restored cluster's replicas at their next reconnect).
fn restore_preserves(cluster: &Cluster) -> impl Iterator<Item = String> {
    [cluster.spec.bootstrap.owner.as_str()]
        .into_iter()
        .chain(MACHINE_ROLES)
        .map(str::to_owned)
}

/// The roles Tusk's own programs log in as (`tusk-instance`'s `machine_roles`).
const MACHINE_ROLES: [&str; 3] = [REPLICATION_USER, REWIND_USER, BACKUP_USER];

/// How long the restore Job may run: `spec.restore.jobDeadlineSeconds` or the default.
pub fn restore_deadline_seconds(cluster: &Cluster) -> i64 {
    (cluster.spec.restore.as_ref())
        .and_then(|r| r.job_deadline_seconds)
        .unwrap_or(DEFAULT_RESTORE_DEADLINE_SECONDS)
}

/// The container-level differences between agent Jobs.
pub(super) struct AgentPod {
    pub(super) args: Vec<String>,
    pub(super) env: Vec<EnvVar>,
    pub(super) volumes: Vec<Volume>,
    pub(super) mounts: Vec<VolumeMount>,
    pub(super) component: Component,
}

/// The Job of one agent run: the agent container (named [`AGENT_CONTAINER`], its termination
/// message read by the operator), `/tmp` on an emptyDir, restricted security, a deadline.
pub(super) fn job_spec(
    cluster: &Cluster,
    agent: &AgentSettings,
    pod: AgentPod,
    backoff_limit: i32,
    deadline_seconds: i64,
) -> JobSpec {
    let AgentPod {
        args,
        mut env,
        mut volumes,
        mut mounts,
        component,
    } = pod;
    // The root filesystem is read-only; the agent's temporary files go to an emptyDir.
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
    // The agent's one-line reason reaches the pod's status; a crash that leaves none (a panic,
    // say) falls back to the end of its log.
    env.push(plain_env("TUSK_TERMINATION_LOG", TERMINATION_LOG));
    let container = Container {
        name: AGENT_CONTAINER.to_owned(),
        termination_message_path: Some(TERMINATION_LOG.to_owned()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        image: Some(agent.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: Some(args),
        env: Some(env),
        volume_mounts: Some(mounts),
        security_context: Some(restricted_container_security()),
        ..Container::default()
    };
    JobSpec {
        backoff_limit: Some(backoff_limit),
        // Kubernetes stops the Job and marks it Failed/DeadlineExceeded: nothing runs forever.
        active_deadline_seconds: Some(deadline_seconds),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(cluster.labels(component)),
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
    }
}

/// An environment variable read from a user-named Secret key.
fn secret_ref(name: &str, source: &SecretKeyRef) -> EnvVar {
    secret_env(name, &source.name, &source.key)
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
