//! A point-in-time restore's part of the database pods (issue 27, `docs/src/design/pitr.md` §5):
//! the first instance manager restores the base backup and replays the archive instead of
//! running initdb (`instance/src/restore.rs`). It gets the source's bucket as the backup agent
//! would, behind the `RESTORE_` prefix (credentials still `secretKeyRef`s, which only the agent
//! it runs for the restore receives), the backup id and the target, and the agent itself,
//! copied beside it by the init container.

use k8s_openapi::api::core::v1::{EnvVar, Volume, VolumeMount};

use super::Cluster;
use super::agent::{Layout, store_environment};
use super::image::INSTANCE_MANAGER_DIR;
use super::pod::plain_env;
use crate::crd::{ObjectStoreRestore, RestoreTarget};

/// Where the backup agent sits in the `postgres` container when a restore needs it.
pub const AGENT_IN_POD: &str = "/tusk/bin/backup-agent";
/// The agent's path in its own image, which the init container copies.
pub const AGENT_IN_IMAGE: &str = "/usr/local/bin/backup-agent";
/// Prefix of the source store's variables (the manager's `restore::SOURCE_PREFIX`).
const PREFIX: &str = "RESTORE_";
/// Where the source's CA bundle or GCS key is mounted, apart from the archive's own.
const RESTORE_SECRETS_DIR: &str = "/var/run/secrets/tusk/restore";

/// A point-in-time restore `cluster` asks for: `spec.restore.objectStore` with a `target`.
pub struct PointInTime<'a> {
    pub source: &'a ObjectStoreRestore,
    pub target: &'a RestoreTarget,
}

pub fn point_in_time<'a>(cluster: &Cluster<'a>) -> Option<PointInTime<'a>> {
    let restore = cluster.spec.restore.as_ref()?;
    Some(PointInTime {
        source: restore.object_store.as_ref()?,
        target: restore.target.as_ref()?,
    })
}

/// The manager's restore variables, and the volumes and mounts of the files they name.
pub fn restore_environment(
    cluster: &Cluster,
    restore: &PointInTime,
) -> (Vec<EnvVar>, Vec<Volume>, Vec<VolumeMount>) {
    let layout = Layout {
        namespace: restore
            .source
            .namespace
            .clone()
            .unwrap_or_else(|| cluster.namespace.to_owned()),
        cluster: restore.source.cluster.clone(),
    };
    let (store_env, mut volumes, mut mounts) =
        store_environment(&layout, &restore.source.destination);
    let mut env = vec![
        plain_env("TUSK_RESTORE_BACKUP_ID", &restore.source.backup_id),
        plain_env("TUSK_AGENT_BINARY", AGENT_IN_POD),
    ];
    if let Some((name, value)) = restore.target.variable() {
        env.push(plain_env(name, value));
    }
    // The store's files move under their own directory, with their own volume names, so an
    // archive to another bucket keeps its own.
    let relocate = |path: &str| path.replace("/var/run/secrets/tusk", RESTORE_SECRETS_DIR);
    for var in store_env {
        env.push(EnvVar {
            name: format!("{PREFIX}{}", var.name),
            value: var.value.as_deref().map(relocate),
            ..var
        });
    }
    for volume in &mut volumes {
        volume.name = format!("restore-{}", volume.name);
    }
    for mount in &mut mounts {
        mount.name = format!("restore-{}", mount.name);
        mount.mount_path = relocate(&mount.mount_path);
    }
    debug_assert!(AGENT_IN_POD.starts_with(INSTANCE_MANAGER_DIR));
    (env, volumes, mounts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    const PITR: &str = "storage: {size: 1Gi}\nrestore:\n  objectStore:\n    cluster: old\n    backupId: latest\n    destination:\n      s3:\n        bucket: b\n        credentials:\n          accessKeyId: {name: s3, key: id}\n          secretAccessKey: {name: s3, key: secret}\n        caBundle:\n          secretKeyRef: {name: ca, key: ca.crt}\n  target: {time: '2026-11-28T10:00:00Z'}\n";

    fn restore_env(spec: &str) -> Option<(Vec<EnvVar>, Vec<Volume>, Vec<VolumeMount>)> {
        let pg = postgresql(spec);
        let cluster = Cluster::new(&pg).unwrap();
        let restore = point_in_time(&cluster)?;
        Some(restore_environment(&cluster, &restore))
    }

    fn value<'a>(env: &'a [EnvVar], name: &str) -> Option<&'a str> {
        env.iter().find(|v| v.name == name)?.value.as_deref()
    }

    #[test]
    fn only_a_restore_with_a_target_restores_in_the_pod() {
        assert!(restore_env(PITR).is_some());
        assert!(
            restore_env(&PITR.replace("  target: {time: '2026-11-28T10:00:00Z'}\n", "")).is_none()
        );
        assert!(restore_env(MINIMAL).is_none());
    }

    #[test]
    fn the_source_reaches_the_manager_prefixed_with_its_credentials_as_references() {
        let (env, volumes, mounts) = restore_env(PITR).unwrap();
        assert_eq!(value(&env, "TUSK_RESTORE_BACKUP_ID"), Some("latest"));
        assert_eq!(
            value(&env, "TUSK_RESTORE_TARGET_TIME"),
            Some("2026-11-28T10:00:00Z")
        );
        assert_eq!(value(&env, "TUSK_AGENT_BINARY"), Some(AGENT_IN_POD));
        assert_eq!(value(&env, "RESTORE_TUSK_STORE"), Some("s3"));
        assert_eq!(value(&env, "RESTORE_TUSK_NAMESPACE"), Some("prod"));
        assert_eq!(value(&env, "RESTORE_TUSK_CLUSTER"), Some("old"));
        assert!(
            value(&env, "TUSK_STORE").is_none(),
            "the archive's variables are not touched"
        );
        let secret = env
            .iter()
            .find(|v| v.name == "RESTORE_AWS_SECRET_ACCESS_KEY")
            .unwrap();
        assert!(secret.value.is_none());
        let key = secret
            .value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref())
            .unwrap();
        assert_eq!((key.name.as_str(), key.key.as_str()), ("s3", "secret"));
        assert_eq!(
            value(&env, "RESTORE_TUSK_S3_CA_BUNDLE"),
            Some("/var/run/secrets/tusk/restore/ca/ca.crt")
        );
        assert_eq!(volumes[0].name, "restore-ca-bundle");
        assert_eq!(mounts[0].mount_path, "/var/run/secrets/tusk/restore/ca");
    }
}
