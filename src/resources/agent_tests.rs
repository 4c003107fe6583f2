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
    agent_environment(&cluster, &Layout::of(&cluster), destination)
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
