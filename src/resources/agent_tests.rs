//! Unit tests of the agent pods' environment, volumes and Job specs.

use super::*;
use crate::resources::fixtures::*;

fn agent_pod(ca_bundle: &str) -> (Vec<EnvVar>, Vec<Volume>, Vec<VolumeMount>) {
    let pg = postgresql(&format!(
        "storage: {{size: 1Gi}}
backup:
  schedule: \"0 2 * * *\"
  destination:
    s3:
      bucket: backups
      endpoint: https://minio.minio.svc:9000
      caBundle: {ca_bundle}
"
    ));
    let cluster = Cluster::new(&pg).expect("valid cluster");
    let destination = &pg.spec.backup.as_ref().expect("backup").destination;
    agent_environment(&cluster, &Layout::of(&cluster), destination, Login::Backup)
}

#[test]
fn a_ca_bundle_is_mounted_from_its_secret_or_config_map() {
    let (env, volumes, mounts) = agent_pod("{configMapKeyRef: {name: trust, key: ca.pem}}");
    let var = env.iter().find(|e| e.name == "TUSK_S3_CA_BUNDLE");
    assert_eq!(
        var.and_then(|v| v.value.as_deref()),
        Some("/var/run/secrets/tusk/ca/ca.crt")
    );
    let volume = volumes
        .iter()
        .find(|v| v.name == "ca-bundle")
        .expect("volume");
    let map = volume.config_map.as_ref().expect("a ConfigMap volume");
    assert_eq!(map.name, "trust");
    let item = &map.items.as_ref().expect("items")[0];
    assert_eq!(
        (item.key.as_str(), item.path.as_str()),
        ("ca.pem", "ca.crt")
    );
    let mount = mounts
        .iter()
        .find(|m| m.name == "ca-bundle")
        .expect("mount");
    assert_eq!(mount.mount_path, "/var/run/secrets/tusk/ca");
    assert_eq!(mount.read_only, Some(true));

    let (_, volumes, _) = agent_pod("{secretKeyRef: {name: minio-ca, key: ca.crt}}");
    let volume = volumes
        .iter()
        .find(|v| v.name == "ca-bundle")
        .expect("volume");
    let secret = volume.secret.as_ref().expect("a Secret volume");
    assert_eq!(secret.secret_name.as_deref(), Some("minio-ca"));
}

fn agent() -> AgentSettings {
    AgentSettings {
        image: "agent:test".into(),
    }
}

fn backup_deadline(spec: &str) -> Option<i64> {
    let pg = postgresql(spec);
    let cluster = Cluster::new(&pg).unwrap();
    let policy = pg.spec.backup.as_ref().unwrap();
    backup_job_spec(&cluster, policy, &agent()).active_deadline_seconds
}

fn restore_deadline(restore: &str) -> Option<i64> {
    let pg = postgresql(&format!("storage: {{size: 1Gi}}\nrestore: {restore}\n"));
    let cluster = Cluster::new(&pg).unwrap();
    let plan = RestorePlan {
        destination: serde_json::from_value(serde_json::json!({"s3": {"bucket": "b"}})).unwrap(),
        layout: Layout::of(&cluster),
        backup_id: "latest".into(),
    };
    restore_job(&cluster, &plan, &agent())
        .spec
        .and_then(|s| s.active_deadline_seconds)
}

#[test]
fn backup_jobs_end_at_their_deadline() {
    assert_eq!(backup_deadline(WITH_S3_BACKUP), Some(21_600));
    let configured = format!("{WITH_S3_BACKUP}  jobDeadlineSeconds: 900\n");
    assert_eq!(backup_deadline(&configured), Some(900));
}

#[test]
fn restore_jobs_end_at_their_deadline() {
    assert_eq!(restore_deadline("{backup: {name: b1}}"), Some(43_200));
    let configured = "{backup: {name: b1}, jobDeadlineSeconds: 3600}";
    assert_eq!(restore_deadline(configured), Some(3600));
}

fn restore_job_of(spec: &str) -> Job {
    let pg = postgresql(spec);
    let cluster = Cluster::new(&pg).unwrap();
    let plan = RestorePlan {
        destination: serde_json::from_value(serde_json::json!({"s3": {"bucket": "b"}})).unwrap(),
        layout: Layout::of(&cluster),
        backup_id: "latest".into(),
    };
    restore_job(&cluster, &plan, &agent())
}

fn backup_job_of(spec: &str) -> JobSpec {
    let pg = postgresql(spec);
    let cluster = Cluster::new(&pg).unwrap();
    backup_job_spec(&cluster, pg.spec.backup.as_ref().unwrap(), &agent())
}

/// (name, literal or `secret/key`) of each variable.
type Env = Vec<(String, String)>;
/// (Secret, keys) of each Secret volume.
type SecretVolumes = Vec<(String, Vec<String>)>;

/// The agent container's env and the pod's Secret volumes.
fn login_of(spec: &JobSpec) -> (Env, SecretVolumes) {
    let pod = spec.template.spec.as_ref().unwrap();
    let env = (pod.containers[0].env.iter().flatten())
        .map(|v| {
            let from = v
                .value_from
                .as_ref()
                .and_then(|f| f.secret_key_ref.as_ref());
            let value = match from {
                Some(s) => format!("{}/{}", s.name, s.key),
                None => v.value.clone().unwrap_or_default(),
            };
            (v.name.clone(), value)
        })
        .collect();
    let secrets = (pod.volumes.iter().flatten())
        .filter_map(|v| v.secret.as_ref())
        .map(|s| {
            let keys = s.items.iter().flatten().map(|i| i.key.clone()).collect();
            (s.secret_name.clone().unwrap_or_default(), keys)
        })
        .collect();
    (env, secrets)
}

fn var<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[test]
fn a_logical_backup_reads_as_tusk_backup_with_the_replication_credential_never_the_superuser() {
    let (env, secrets) = login_of(&backup_job_of(WITH_S3_BACKUP));
    assert_eq!(var(&env, "PGUSER"), Some("tusk_backup"));
    assert_eq!(var(&env, "PGPASSWORD"), Some("demo-replication/password"));
    assert_eq!(
        var(&env, "PGSSLCERT"),
        Some("/var/run/secrets/tusk/client/tls.crt")
    );
    assert_eq!(
        var(&env, "PGSSLKEY"),
        Some("/var/run/secrets/tusk/client/tls.key")
    );
    let client = (
        "demo-server-tls".to_owned(),
        vec!["replication.crt".into(), "replication.key".into()],
    );
    assert!(secrets.contains(&client), "{secrets:?}");
    assert!(
        !env.iter().any(|(_, v)| v.starts_with("demo-superuser/")),
        "a backup reads no superuser credential: {env:?}"
    );
    // The key is 0640, readable through the pod's fsGroup (the postgres image's user: the
    // Job runs the server's own pg_dump).
    let pod = backup_job_of(WITH_S3_BACKUP).template.spec.unwrap();
    assert_eq!(pod.security_context.unwrap().fs_group, Some(999));
}

#[test]
fn a_restore_logs_in_as_the_superuser_with_its_own_short_lived_certificate() {
    let job = restore_job_of("storage: {size: 1Gi}\nrestore: {backup: {name: b1}}\n");
    let (env, secrets) = login_of(job.spec.as_ref().unwrap());
    assert_eq!(var(&env, "PGUSER"), Some("demo-superuser/username"));
    assert_eq!(var(&env, "PGPASSWORD"), Some("demo-superuser/password"));
    assert_eq!(
        var(&env, "PGSSLCERT"),
        Some("/var/run/secrets/tusk/client/tls.crt")
    );
    let client = (
        "demo-restore-tls".to_owned(),
        vec!["tls.crt".into(), "tls.key".into()],
    );
    assert!(secrets.contains(&client), "{secrets:?}");
    // The restored globals leave this cluster's own roles (and their passwords) alone.
    let args = job.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    assert_eq!(args[0], "restore");
    let preserved: Vec<&str> = (args[1..].chunks(2))
        .map(|pair| {
            assert_eq!(pair[0], "--preserve-role");
            pair[1].as_str()
        })
        .collect();
    assert_eq!(
        preserved,
        ["app", "tusk_replication", "tusk_rewind", "tusk_backup"]
    );
}

#[test]
fn with_certificates_the_user_brings_no_client_certificate_is_presented() {
    let brought = format!("{WITH_S3_BACKUP}tls: {{serverSecret: shop-tls}}\n");
    let (env, secrets) = login_of(&backup_job_of(&brought));
    assert_eq!(var(&env, "PGSSLCERT"), None);
    // Only the CA the server is verified with: no key of any kind.
    assert_eq!(
        secrets,
        [("shop-tls".to_owned(), vec!["ca.crt".to_owned()])]
    );
}

#[test]
fn backups_and_restores_run_the_servers_own_programs_from_the_clusters_image() {
    let image = "registry.local/pg:16.4";
    let spec = format!("{WITH_S3_BACKUP}\nversion: \"16\"\nimage: {image}\n");
    let restore = restore_job_of(&format!(
        "version: \"16\"\nimage: {image}\nstorage: {{size: 1Gi}}\nrestore: {{backup: {{name: b1}}}}\n"
    ));
    for job in [backup_job_of(&spec), restore.spec.unwrap()] {
        let pod = job.template.spec.unwrap();
        let main = &pod.containers[0];
        assert_eq!(main.image.as_deref(), Some(image));
        assert_eq!(
            main.command.as_deref(),
            Some(&["/tusk/bin/backup-agent".to_owned()][..])
        );
        let copy = &pod.init_containers.as_ref().expect("the agent copied in")[0];
        assert_eq!(copy.image.as_deref(), Some(agent().image.as_str()));
        let security = pod.security_context.expect("pod security");
        assert_eq!(
            (security.run_as_user, security.run_as_group),
            (Some(999), Some(999))
        );
        let agent_bin = (main.volume_mounts.iter().flatten()).find(|m| m.mount_path == "/tusk/bin");
        assert!(agent_bin.is_some(), "{:?}", main.volume_mounts);
    }
}
