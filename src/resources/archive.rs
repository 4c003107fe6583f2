//! Continuous WAL archiving in the database pods (`spec.backup.walArchive`, issue 27): the
//! settings PostgreSQL archives with, and what the instance manager needs to reach the bucket.
//! PostgreSQL's `archive_command` is the manager's thin hook; the manager alone holds the
//! credentials and uploads (docs/pitr-design.md §1), so no server process can read them.

use k8s_openapi::api::core::v1::{EnvVar, Volume, VolumeMount};

use super::Cluster;
use super::agent::{Layout, store_environment};
use super::image::INSTANCE_MANAGER;
use crate::crd::Destination;

/// How a cluster archives: into which destination, closing a segment after how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WalArchiving<'a> {
    pub destination: &'a Destination,
    pub timeout_seconds: i32,
    /// The disk policy's threshold (percent of the volume; 100: never).
    pub gap_at_percent: i32,
}

/// The archiving `cluster` asks for, if any.
pub fn wal_archiving<'a>(cluster: &Cluster<'a>) -> Option<WalArchiving<'a>> {
    let backup = cluster.spec.backup.as_ref()?;
    let policy = backup.wal_archive.as_ref()?;
    Some(WalArchiving {
        destination: &backup.destination,
        timeout_seconds: policy.timeout_seconds(),
        gap_at_percent: policy.gap_at_volume_percent(),
    })
}

/// postgresql.conf lines that turn archiving on. Only the primary uploads, but every server
/// archives (`always`): a standby's manager answers for a file once the bucket holds it, so
/// a standby keeps the WAL its primary has not archived yet, and after a promotion archives
/// it (issue 46, defect 9; `instance/src/standby_archive.rs`).
pub fn archive_settings(timeout_seconds: i32) -> String {
    format!(
        "# Continuous WAL archiving (spec.backup.walArchive): the instance manager uploads.\n\
         archive_mode = always\n\
         archive_command = '{INSTANCE_MANAGER} wal-push %p'\n\
         archive_timeout = '{timeout_seconds}s'\n"
    )
}

/// The bucket settings of the manager's environment, and the volumes with the files they name
/// (a private CA bundle, a GCS key). The identity variables the manager already has are left
/// out; the credentials stay `secretKeyRef`s, and the manager passes them to no child.
pub fn manager_store(
    cluster: &Cluster,
    archiving: &WalArchiving,
) -> (Vec<EnvVar>, Vec<Volume>, Vec<VolumeMount>) {
    let (mut env, volumes, mounts) = store_environment(&Layout::of(cluster), archiving.destination);
    env.retain(|v| {
        !matches!(
            v.name.as_str(),
            "TUSK_NAMESPACE" | "TUSK_CLUSTER" | "TUSK_LOG_FORMAT"
        )
    });
    env.push(EnvVar {
        name: "TUSK_ARCHIVE_GAP_AT_PERCENT".into(),
        value: Some(archiving.gap_at_percent.to_string()),
        ..EnvVar::default()
    });
    (env, volumes, mounts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    const ARCHIVING: &str = "storage: {size: 1Gi}\nbackup:\n  schedule: '@daily'\n  walArchive: {}\n  destination:\n    s3:\n      bucket: b\n      credentials:\n        accessKeyId: {name: s3, key: id}\n        secretAccessKey: {name: s3, key: secret}\n      caBundle:\n        configMapKeyRef: {name: ca, key: ca.crt}\n";

    #[test]
    fn archiving_is_on_only_with_wal_archive_and_five_seconds_by_default() {
        let pg = postgresql(ARCHIVING);
        let cluster = Cluster::new(&pg).unwrap();
        assert_eq!(wal_archiving(&cluster).map(|a| a.timeout_seconds), Some(5));
        let pg =
            postgresql(&ARCHIVING.replace("walArchive: {}", "walArchive: {timeoutSeconds: 60}"));
        let cluster = Cluster::new(&pg).unwrap();
        assert_eq!(wal_archiving(&cluster).map(|a| a.timeout_seconds), Some(60));
        let pg = postgresql(&ARCHIVING.replace("  walArchive: {}\n", ""));
        assert_eq!(wal_archiving(&Cluster::new(&pg).unwrap()), None);
        assert_eq!(
            wal_archiving(&Cluster::new(&postgresql(MINIMAL)).unwrap()),
            None
        );
    }

    #[test]
    fn postgresql_archives_through_the_manager_hook() {
        let settings = archive_settings(5);
        assert!(settings.contains("archive_mode = always\n"));
        assert!(settings.contains("archive_command = '/tusk/bin/tusk-instance wal-push %p'\n"));
        assert!(settings.contains("archive_timeout = '5s'\n"));
    }

    #[test]
    fn the_manager_gets_the_bucket_and_its_credentials_as_secret_references() {
        let pg = postgresql(ARCHIVING);
        let cluster = Cluster::new(&pg).unwrap();
        let (env, volumes, mounts) = manager_store(&cluster, &wal_archiving(&cluster).unwrap());
        let names: Vec<&str> = env.iter().map(|v| v.name.as_str()).collect();
        assert!(
            names.contains(&"TUSK_STORE") && names.contains(&"TUSK_BUCKET"),
            "{names:?}"
        );
        assert!(
            !names.contains(&"TUSK_NAMESPACE"),
            "the manager has its own"
        );
        for secret in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
            let var = env.iter().find(|v| v.name == secret).unwrap();
            assert!(var.value.is_none(), "{secret} must be a secretKeyRef");
            assert!(var.value_from.as_ref().unwrap().secret_key_ref.is_some());
        }
        assert_eq!(volumes.len(), 1, "the CA bundle");
        assert_eq!(mounts[0].read_only, Some(true));
    }

    #[test]
    fn the_manager_learns_the_disk_policy_80_percent_by_default() {
        let threshold = |spec: &str| {
            let pg = postgresql(spec);
            let cluster = Cluster::new(&pg).unwrap();
            let (env, _, _) = manager_store(&cluster, &wal_archiving(&cluster).unwrap());
            let var = env.iter().find(|v| v.name == "TUSK_ARCHIVE_GAP_AT_PERCENT");
            var.and_then(|v| v.value.clone())
        };
        assert_eq!(threshold(ARCHIVING).as_deref(), Some("80"));
        let never = ARCHIVING.replace("walArchive: {}", "walArchive: {gapAtVolumePercent: 100}");
        assert_eq!(threshold(&never).as_deref(), Some("100"));
    }
}
