//! The containers of a database pod: an init container that copies the instance manager out of
//! the agent image, and the stock `postgres` image running that manager as PID 1
//! (docs/src/design/replication.md is the contract between the two).

use k8s_openapi::api::core::v1::{Container, EnvVar, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::archive::{manager_store, wal_archiving};
use super::config::{CONFIG_DIR, TLS_DIR};
use super::image::{DATA_MOUNT, INSTANCE_MANAGER, INSTANCE_MANAGER_DIR, PGDATA, POSTGRES_PORT};
use super::pod::{
    mount, plain_env, pod_field_env, restricted_container_security, secret_env, tcp_port,
};
use super::point_in_time::{AGENT_IN_IMAGE, point_in_time, restore_environment};
use super::secrets::STATUS_TOKEN_KEY;
use super::{AgentSettings, Cluster};

/// The instance manager's HTTP status port (`/status`, `/healthz`, `/readyz`).
pub const STATUS_PORT: i32 = 8000;
/// Where Secret `<cluster>-monitoring` (the status token) is mounted.
pub const STATUS_TOKEN_DIR: &str = "/etc/tusk-status";

/// Init container `install-instance-manager`: the agent image copies its `tusk-instance` into
/// the shared emptyDir, so the database container keeps the stock image.
/// A point-in-time restore needs the backup agent too, copied beside the manager; so does a
/// cluster that archives (its primary writes the restore point each base backup's verification
/// recovers to, with every table's count, through the agent).
pub fn installer_container(cluster: &Cluster, agent: &AgentSettings) -> Container {
    let mut installer = installer_container_plain(agent);
    let with_agent = point_in_time(cluster).is_some() || wal_archiving(cluster).is_some();
    if with_agent && let Some(command) = installer.command.as_mut() {
        command.extend(["--with".to_owned(), AGENT_IN_IMAGE.to_owned()]);
    }
    installer
}

/// The installer of the instance manager alone (the pooler's pods run it too).
pub fn installer_container_plain(agent: &AgentSettings) -> Container {
    let command = vec![
        "tusk-instance".to_owned(),
        "install".to_owned(),
        INSTANCE_MANAGER.to_owned(),
    ];
    Container {
        name: "install-instance-manager".to_owned(),
        image: Some(agent.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(command),
        security_context: Some(restricted_container_security()),
        volume_mounts: Some(vec![mount("tusk-bin", INSTANCE_MANAGER_DIR, false)]),
        ..Container::default()
    }
}

fn http_probe(path: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String("status".to_owned()),
            // The kubelet does not verify the certificate; the port serves nothing but TLS.
            scheme: Some("HTTPS".to_owned()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(1),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

/// Container `postgres`: the cluster's image running `tusk-instance run`.
pub fn postgres_container(cluster: &Cluster) -> Container {
    let spec = cluster.spec;
    let mut env = manager_env(cluster);
    let mut mounts = vec![
        mount("data", DATA_MOUNT, false),
        mount("config", CONFIG_DIR, true),
        mount("tls", TLS_DIR, true),
        mount("status-token", STATUS_TOKEN_DIR, true),
        mount("verifiers", tusk_contract::roles::VERIFIERS_DIR, true),
        mount("tusk-bin", INSTANCE_MANAGER_DIR, true),
        mount("run", "/var/run/postgresql", false),
        mount("tmp", "/tmp", false),
        mount("shm", "/dev/shm", false),
    ];
    if let Some(archiving) = wal_archiving(cluster) {
        let (store_env, _, store_mounts) = manager_store(cluster, &archiving);
        env.extend(store_env);
        mounts.extend(store_mounts);
    }
    if let Some(restore) = point_in_time(cluster) {
        let (restore_env, _, restore_mounts) = restore_environment(cluster, &restore);
        env.extend(restore_env);
        mounts.extend(restore_mounts);
    }
    Container {
        name: "postgres".to_owned(),
        image: Some(cluster.postgres_image()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![INSTANCE_MANAGER.to_owned(), "run".to_owned()]),
        env: Some(env),
        ports: Some(vec![
            tcp_port("postgres", POSTGRES_PORT),
            tcp_port("status", STATUS_PORT),
        ]),
        resources: spec.resources.clone(),
        // Ready only while PostgreSQL serves in the role the Lease gives: a fenced or hung
        // primary leaves the Services, and the operator starts watching its Lease, within 2-3 s.
        readiness_probe: Some(http_probe("/readyz", 1, 2)),
        // The manager, not PostgreSQL: a long crash recovery or clone must not be killed.
        liveness_probe: Some(http_probe("/healthz", 10, 6)),
        // No preStop hook: the manager turns SIGTERM into a fast shutdown itself.
        security_context: Some(restricted_container_security()),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

/// The manager's environment (docs/src/design/replication.md).
fn manager_env(cluster: &Cluster) -> Vec<EnvVar> {
    let spec = cluster.spec;
    let mut env = vec![
        plain_env("PGDATA", PGDATA),
        pod_field_env("TUSK_POD_NAME", "metadata.name"),
        pod_field_env("TUSK_POD_UID", "metadata.uid"),
        pod_field_env("TUSK_NAMESPACE", "metadata.namespace"),
        pod_field_env("TUSK_POD_IP", "status.podIP"),
        plain_env("TUSK_CLUSTER", cluster.name),
        plain_env("TUSK_LEASE", cluster.lease_name()),
        plain_env("TUSK_PEER_DOMAIN", cluster.peer_domain()),
        plain_env("TUSK_CONFIG_FILE", format!("{CONFIG_DIR}/postgresql.conf")),
        plain_env("TUSK_STATUS_PORT", STATUS_PORT.to_string()),
        plain_env(
            "TUSK_STATUS_TOKEN_FILE",
            format!("{STATUS_TOKEN_DIR}/{STATUS_TOKEN_KEY}"),
        ),
        // No superuser or app password: the manager makes those roles from the verifiers
        // mounted from <name>-verifiers. The replication role's the WAL receiver needs.
        plain_env("TUSK_APP_USER", spec.bootstrap.owner.clone()),
        plain_env("TUSK_APP_DATABASE", spec.bootstrap.database.clone()),
        secret_env(
            "TUSK_REPLICATION_PASSWORD",
            &cluster.replication_secret_name(),
            "password",
        ),
    ];
    // Preferred durability: the primary's manager owns `synchronous_standby_names`. Set only
    // then, so clusters without it keep their pod template (no restart on upgrade).
    let synchronous = spec
        .replication
        .as_ref()
        .and_then(|r| r.synchronous.as_ref());
    if let Some(synchronous) = synchronous.filter(|s| !s.is_required()) {
        env.push(plain_env(
            "TUSK_SYNC_NUMBER",
            synchronous.number.to_string(),
        ));
        env.push(plain_env("TUSK_SYNC_DURABILITY", "preferred"));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    fn container(spec: &str) -> Container {
        postgres_container(&Cluster::new(&postgresql(spec)).unwrap())
    }

    #[test]
    fn runs_the_instance_manager_in_the_official_image_of_the_major() {
        let c = container(MINIMAL);
        assert_eq!(c.image.as_deref(), Some("docker.io/library/postgres:18"));
        assert_eq!(c.command.unwrap(), [INSTANCE_MANAGER, "run"]);
        let c = container("version: \"16\"\nstorage: {size: 1Gi}");
        assert_eq!(c.image.as_deref(), Some("docker.io/library/postgres:16"));
        let c = container("image: registry.local/pg:17.2\nstorage: {size: 1Gi}");
        assert_eq!(c.image.as_deref(), Some("registry.local/pg:17.2"));
    }

    #[test]
    fn the_installer_copies_the_manager_from_the_agent_image() {
        let agent = AgentSettings {
            image: "ghcr.io/tusk/backup-agent:test".into(),
        };
        let pg = postgresql(MINIMAL);
        let init = installer_container(&Cluster::new(&pg).unwrap(), &agent);
        assert_eq!(
            init.image.as_deref(),
            Some("ghcr.io/tusk/backup-agent:test")
        );
        assert_eq!(
            init.command.unwrap(),
            ["tusk-instance", "install", INSTANCE_MANAGER]
        );
        // A point-in-time restore brings the agent along.
        let pg = postgresql(
            "storage: {size: 1Gi}\nrestore:\n  objectStore:\n    cluster: old\n    destination: {s3: {bucket: b}}\n  target: {}\n",
        );
        let init = installer_container(&Cluster::new(&pg).unwrap(), &agent);
        assert_eq!(
            init.command.unwrap(),
            [
                "tusk-instance",
                "install",
                INSTANCE_MANAGER,
                "--with",
                "/usr/local/bin/backup-agent"
            ]
        );
        let mounts = init.volume_mounts.unwrap();
        assert_eq!(
            (mounts[0].name.as_str(), mounts[0].read_only),
            ("tusk-bin", None)
        );
        // So does archiving: the primary's restore points are the agent's work.
        let pg = postgresql(
            "storage: {size: 1Gi}\nbackup:\n  schedule: \"0 2 * * *\"\n  walArchive: {}\n  destination: {s3: {bucket: b}}\n",
        );
        let init = installer_container(&Cluster::new(&pg).unwrap(), &agent);
        assert!(init.command.unwrap().contains(&"--with".to_owned()));
    }

    #[test]
    fn the_manager_learns_its_pod_lease_and_peers_from_its_environment() {
        let env = container(MINIMAL).env.unwrap();
        let value = |name: &str| env.iter().find(|e| e.name == name).unwrap().clone();
        assert_eq!(value("TUSK_LEASE").value.as_deref(), Some("demo-primary"));
        assert_eq!(
            value("TUSK_PEER_DOMAIN").value.as_deref(),
            Some("demo-hl.prod.svc")
        );
        let pod = value("TUSK_POD_NAME")
            .value_from
            .unwrap()
            .field_ref
            .unwrap();
        assert_eq!(pod.field_path, "metadata.name");
        let ip = value("TUSK_POD_IP").value_from.unwrap().field_ref.unwrap();
        assert_eq!(ip.field_path, "status.podIP");
        assert_eq!(
            value("PGDATA").value.as_deref(),
            Some("/var/lib/postgresql/data")
        );
    }

    #[test]
    fn only_preferred_durability_hands_the_synchronous_setting_to_the_manager() {
        let sync_env = |spec: &str| -> Vec<(String, Option<String>)> {
            let env = container(spec).env.unwrap();
            env.into_iter()
                .filter(|e| e.name.starts_with("TUSK_SYNC_"))
                .map(|e| (e.name, e.value))
                .collect()
        };
        let preferred = "instances: 3\nstorage: {size: 1Gi}\n\
                         replication: {synchronous: {number: 2, durability: preferred}}";
        assert_eq!(
            sync_env(preferred),
            [
                ("TUSK_SYNC_NUMBER".to_owned(), Some("2".to_owned())),
                (
                    "TUSK_SYNC_DURABILITY".to_owned(),
                    Some("preferred".to_owned())
                ),
            ]
        );
        let required =
            "instances: 3\nstorage: {size: 1Gi}\nreplication: {synchronous: {number: 2}}";
        assert!(sync_env(required).is_empty());
        assert!(sync_env(MINIMAL).is_empty());
    }

    #[test]
    fn the_replication_password_alone_comes_from_a_secret_never_a_literal() {
        let env = container(MINIMAL).env.unwrap();
        let var = (env.iter())
            .find(|e| e.name == "TUSK_REPLICATION_PASSWORD")
            .unwrap();
        assert_eq!(var.value, None);
        assert!(var.value_from.as_ref().unwrap().secret_key_ref.is_some());
        // The superuser's and the app's: verifiers in a mounted file, no password.
        for name in ["POSTGRES_PASSWORD", "TUSK_APP_PASSWORD"] {
            assert!(env.iter().all(|e| e.name != name), "{name}");
        }
        let mounts = container(MINIMAL).volume_mounts.unwrap();
        assert!(mounts.iter().any(|m| m.name == "verifiers"
            && m.mount_path == tusk_contract::roles::VERIFIERS_DIR
            && m.read_only == Some(true)));
    }

    #[test]
    fn readiness_asks_the_manager_and_liveness_never_kills_a_recovering_server() {
        let c = container(MINIMAL);
        let ready = c.readiness_probe.unwrap().http_get.unwrap();
        assert_eq!(ready.path.as_deref(), Some("/readyz"));
        let live = c.liveness_probe.unwrap().http_get.unwrap();
        assert_eq!(live.path.as_deref(), Some("/healthz"));
        assert!(c.startup_probe.is_none() && c.lifecycle.is_none());
    }

    #[test]
    fn is_unprivileged_with_a_read_only_root_and_a_read_only_manager() {
        let c = container(MINIMAL);
        let security = c.security_context.unwrap();
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.capabilities.unwrap().drop.unwrap(), ["ALL"]);
        let mounts = c.volume_mounts.unwrap();
        let manager = mounts.iter().find(|m| m.name == "tusk-bin").unwrap();
        assert_eq!(manager.read_only, Some(true));
    }
}
