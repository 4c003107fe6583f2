//! Who an agent Job logs in to the cluster as (issue 47): each Job with the least it needs, the
//! superuser only for a restore. With Tusk's own CA, `pg_hba.conf` asks every one of them for a
//! client certificate besides the password, mounted here root-owned, group `fsGroup`, 0640:
//! what libpq accepts for a key it does not own.

use k8s_openapi::api::core::v1::{
    EnvVar, KeyToPath, PodSpec, SecretVolumeSource, Volume, VolumeMount,
};

use super::Cluster;
use super::pod::{AGENT_UID, plain_env, restricted_pod_security, secret_env};
use super::tls::{REPLICATION_CRT, REPLICATION_KEY, TLS_CRT, TLS_KEY};

pub use tusk_contract::roles::BACKUP_USER;
/// Where the client certificate is mounted in agent pods.
pub const CLIENT_TLS_DIR: &str = "/var/run/secrets/tusk/client";
const CLIENT_TLS_VOLUME: &str = "client-tls";

/// An agent Job's login.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Login {
    /// `tusk_replication` (physical base backups): its own Secret and certificate.
    Replication,
    /// `tusk_backup` (logical backups): it reads every database, with the replication role's
    /// password and certificate.
    Backup,
    /// The superuser (a logical restore): its Secret, and a short-lived certificate issued for
    /// the restore alone (Secret `<name>-restore-tls`).
    Superuser,
}

impl Login {
    /// PGUSER and PGPASSWORD.
    pub fn credentials(self, cluster: &Cluster) -> [EnvVar; 2] {
        let replication = cluster.replication_secret_name();
        match self {
            Login::Replication => [
                secret_env("PGUSER", &replication, "username"),
                secret_env("PGPASSWORD", &replication, "password"),
            ],
            Login::Backup => [
                plain_env("PGUSER", BACKUP_USER),
                secret_env("PGPASSWORD", &replication, "password"),
            ],
            Login::Superuser => {
                let superuser = cluster.superuser_secret_name();
                [
                    secret_env("PGUSER", &superuser, "username"),
                    secret_env("PGPASSWORD", &superuser, "password"),
                ]
            }
        }
    }

    /// The Secret and keys of the client certificate, when the cluster runs on Tusk's CA.
    fn certificate(self, cluster: &Cluster) -> Option<(String, [&'static str; 2])> {
        cluster.user_server_secret().is_none().then(|| match self {
            Login::Replication | Login::Backup => (
                cluster.server_tls_secret_name(),
                [REPLICATION_CRT, REPLICATION_KEY],
            ),
            Login::Superuser => (cluster.restore_tls_secret_name(), [TLS_CRT, TLS_KEY]),
        })
    }

    /// Presents the client certificate from `pod`'s first container (the agent's), if any:
    /// PGSSLCERT/PGSSLKEY, the Secret volume and its mount, and `fsGroup` on the pod.
    pub fn present_certificate(self, cluster: &Cluster, pod: &mut PodSpec) {
        let Some((secret, [cert, key])) = self.certificate(cluster) else {
            return;
        };
        pod.security_context = Some(restricted_pod_security(AGENT_UID, true));
        let items = [(cert, TLS_CRT), (key, TLS_KEY)].map(|(key, path)| KeyToPath {
            key: key.to_owned(),
            path: path.to_owned(),
            ..KeyToPath::default()
        });
        pod.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: CLIENT_TLS_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret),
                items: Some(items.to_vec()),
                default_mode: Some(0o640),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        let Some(container) = pod.containers.first_mut() else {
            return;
        };
        container.env.get_or_insert_with(Vec::new).extend([
            plain_env("PGSSLCERT", format!("{CLIENT_TLS_DIR}/{TLS_CRT}")),
            plain_env("PGSSLKEY", format!("{CLIENT_TLS_DIR}/{TLS_KEY}")),
        ]);
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: CLIENT_TLS_VOLUME.to_owned(),
                mount_path: CLIENT_TLS_DIR.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
    }
}
