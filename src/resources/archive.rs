//! Continuous WAL archiving in the database pods (`spec.backup.walArchive`, issue 27): the
//! settings PostgreSQL archives with, and what the instance manager needs to reach the bucket.
//! PostgreSQL's `archive_command` is the manager's thin hook; the manager alone holds the
//! credentials and uploads (docs/src/design/pitr.md §1), so no server process can read them.

use k8s_openapi::api::core::v1::{EnvVar, Volume, VolumeMount};

use super::Cluster;
use super::agent::{GCS_KEY_VOLUME, Layout, store_environment};
use super::image::INSTANCE_MANAGER;
use super::pod::secret_env;
use crate::crd::Destination;

/// The manager's GCS key, as JSON (`backup_store::settings::GCS_KEY_JSON_ENV`).
const GCS_KEY_JSON_ENV: &str = "TUSK_GCS_KEY_JSON";

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
    let (mut env, mut volumes, mut mounts) =
        store_environment(&Layout::of(cluster), archiving.destination);
    env.retain(|v| {
        !matches!(
            v.name.as_str(),
            "TUSK_NAMESPACE"
                | "TUSK_CLUSTER"
                | "TUSK_LOG_FORMAT"
                | "GOOGLE_APPLICATION_CREDENTIALS"
        )
    });
    // The GCS key reaches the manager in its environment, which is root's to read (the manager
    // is not dumpable) and which no child inherits; a file would be readable by every database
    // process of the same user (`pg_read_file`; issue 47, issue 46 defect 8).
    if let Some(key) = (archiving.destination.gcs.as_ref())
        .and_then(|g| g.credentials.as_ref())
        .map(|c| &c.service_account_key)
    {
        env.push(secret_env(GCS_KEY_JSON_ENV, &key.name, &key.key));
        volumes.retain(|v| v.name != GCS_KEY_VOLUME);
        mounts.retain(|m| m.name != GCS_KEY_VOLUME);
    }
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

    /// Issue 47, defect 6: a key file in the `postgres` container was readable by every
    /// database process (`pg_read_file`); in the manager's environment it is root's.
    #[test]
    fn the_managers_gcs_key_is_in_its_environment_never_a_file() {
        let gcs = ARCHIVING.replace(
            "    s3:\n      bucket: b\n      credentials:\n        accessKeyId: {name: s3, key: id}\n        secretAccessKey: {name: s3, key: secret}\n      caBundle:\n        configMapKeyRef: {name: ca, key: ca.crt}\n",
            "    gcs:\n      bucket: b\n      credentials:\n        serviceAccountKey: {name: gcs, key: key.json}\n",
        );
        let pg = postgresql(&gcs);
        let cluster = Cluster::new(&pg).unwrap();
        let (env, volumes, mounts) = manager_store(&cluster, &wal_archiving(&cluster).unwrap());
        let key = env.iter().find(|v| v.name == "TUSK_GCS_KEY_JSON").unwrap();
        let reference = key
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (reference.name.as_str(), reference.key.as_str()),
            ("gcs", "key.json")
        );
        assert!(
            env.iter()
                .all(|v| v.name != "GOOGLE_APPLICATION_CREDENTIALS")
        );
        assert!(volumes.is_empty() && mounts.is_empty(), "{volumes:?}");
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
