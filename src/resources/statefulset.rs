//! The StatefulSet running PostgreSQL from the official image (or a compatible override).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, ExecAction, KeyToPath,
    Lifecycle, LifecycleHandler, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec,
    PodTemplateSpec, Probe, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::config::{CONFIG_DIR, INITDB_SCRIPT_KEY};
use super::pod::{plain_env, restricted_container_security, restricted_pod_security, secret_env};
use super::{Cluster, Component, SUPERUSER_NAME};
use crate::crd::{PostgreSQLSpec, PostgresVersion};

pub const POSTGRES_PORT: i32 = 5432;
/// The volume is mounted here for every major (18+ images moved their own default)…
pub const DATA_MOUNT: &str = "/var/lib/postgresql";
/// …and PGDATA is a subdirectory, so `lost+found` on a fresh volume never upsets initdb.
pub const PGDATA: &str = "/var/lib/postgresql/data";
/// The `postgres` user of the official Debian-based images.
pub const POSTGRES_UID: i64 = 999;
/// Annotation on the pod template carrying the ConfigMap checksum.
pub const CONFIG_CHECKSUM_ANNOTATION: &str = "tusk.dev/config-checksum";

/// The official image for a major version.
pub fn default_image(version: PostgresVersion) -> String {
    format!("docker.io/library/postgres:{}", version.major())
}

/// The PostgreSQL image a cluster runs: its `spec.image`, or the official one of its major.
pub fn postgres_image(spec: &PostgreSQLSpec) -> String {
    spec.image
        .clone()
        .unwrap_or_else(|| default_image(spec.version))
}

/// StatefulSet `<name>`; `config_checksum` is the ConfigMap's [`super::config_checksum`].
pub fn statefulset(cluster: &Cluster, config_checksum: &str) -> StatefulSet {
    let spec = cluster.spec;
    let selector = cluster.selector_labels(Component::Database);
    let volume_claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data".to_owned()),
            labels: Some(selector.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            storage_class_name: spec.storage.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(spec.storage.size.clone()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    };
    StatefulSet {
        metadata: cluster.child_meta(cluster.statefulset_name(), Component::Database),
        spec: StatefulSetSpec {
            replicas: Some(spec.instances),
            service_name: Some(cluster.headless_service_name()),
            selector: LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            },
            pod_management_policy: Some("OrderedReady".to_owned()),
            // Deleting the PostgreSQL deletes its volumes too: backups, not PVCs, are what
            // outlives a cluster (see spec.backup.onDelete).
            persistent_volume_claim_retention_policy: Some(
                StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: Some("Delete".to_owned()),
                    when_scaled: Some("Retain".to_owned()),
                },
            ),
            template: pod_template(cluster, config_checksum),
            volume_claim_templates: Some(vec![volume_claim]),
            ..StatefulSetSpec::default()
        },
        status: None,
    }
}

fn pod_template(cluster: &Cluster, config_checksum: &str) -> PodTemplateSpec {
    let config_volume = |name: &str, keys: &[&str], mode: i32| Volume {
        name: name.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: cluster.config_map_name(),
            default_mode: Some(mode),
            items: Some(
                keys.iter()
                    .map(|k| KeyToPath {
                        key: (*k).to_owned(),
                        path: (*k).to_owned(),
                        ..KeyToPath::default()
                    })
                    .collect(),
            ),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    };
    let empty_dir = |name: &str, medium: Option<&str>| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: medium.map(str::to_owned),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    };
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(cluster.labels(Component::Database)),
            annotations: Some(BTreeMap::from([(
                CONFIG_CHECKSUM_ANNOTATION.to_owned(),
                config_checksum.to_owned(),
            )])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![postgres_container(cluster)],
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(60),
            security_context: Some(restricted_pod_security(POSTGRES_UID, true)),
            volumes: Some(vec![
                config_volume(
                    "config",
                    &["postgresql.conf", "pg_hba.conf", "pg_ident.conf"],
                    0o444,
                ),
                // Executable, so the image's entrypoint runs it in its own shell instead of
                // sourcing it into the entrypoint's.
                config_volume("initdb", &[INITDB_SCRIPT_KEY], 0o555),
                empty_dir("run", None),
                empty_dir("tmp", None),
                // PostgreSQL's parallel queries use POSIX shared memory; the runtime's 64 MiB
                // /dev/shm is too small for them.
                empty_dir("shm", Some("Memory")),
            ]),
            ..PodSpec::default()
        }),
    }
}

fn pg_isready() -> ExecAction {
    ExecAction {
        command: Some(
            [
                "pg_isready",
                "--host=127.0.0.1",
                "--port=5432",
                "--username=postgres",
                "--quiet",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
    }
}

fn probe(period: i32, failures: i32) -> Probe {
    Probe {
        exec: Some(pg_isready()),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

fn postgres_container(cluster: &Cluster) -> Container {
    let spec = cluster.spec;
    let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    };
    Container {
        name: "postgres".to_owned(),
        image: Some(postgres_image(spec)),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: Some(vec![
            "-c".to_owned(),
            format!("config_file={CONFIG_DIR}/postgresql.conf"),
        ]),
        env: Some(vec![
            plain_env("PGDATA", PGDATA),
            plain_env("POSTGRES_USER", SUPERUSER_NAME),
            secret_env(
                "POSTGRES_PASSWORD",
                &cluster.superuser_secret_name(),
                "password",
            ),
            plain_env("POSTGRES_INITDB_ARGS", "--data-checksums"),
            plain_env("TUSK_APP_USER", spec.bootstrap.owner.clone()),
            plain_env("TUSK_APP_DATABASE", spec.bootstrap.database.clone()),
            secret_env("TUSK_APP_PASSWORD", &cluster.app_secret_name(), "password"),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("postgres".to_owned()),
            container_port: POSTGRES_PORT,
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        resources: spec.resources.clone(),
        // Up to an hour for initdb or crash recovery before liveness takes over.
        startup_probe: Some(probe(5, 720)),
        readiness_probe: Some(probe(5, 3)),
        liveness_probe: Some(probe(10, 6)),
        // Kubernetes sends SIGTERM, which PostgreSQL treats as a "smart" shutdown that waits for
        // every client; a fast shutdown finishes within the grace period. `--no-wait`: PostgreSQL
        // is the container's PID 1, so the container ends with it and the runtime kills a
        // waiting pg_ctl (exit 137: a FailedPreStopHook Warning on every pod deletion, seen on a
        // real node). The kubelet waits for the container to exit after the hook anyway.
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(
                        [
                            "pg_ctl",
                            "stop",
                            "--mode=fast",
                            "--no-wait",
                            "--pgdata",
                            PGDATA,
                        ]
                        .map(str::to_owned)
                        .to_vec(),
                    ),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        security_context: Some(restricted_container_security()),
        volume_mounts: Some(vec![
            mount("data", DATA_MOUNT, false),
            mount("config", CONFIG_DIR, true),
            mount("initdb", "/docker-entrypoint-initdb.d", true),
            mount("run", "/var/run/postgresql", false),
            mount("tmp", "/tmp", false),
            mount("shm", "/dev/shm", false),
        ]),
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    fn build(spec: &str) -> StatefulSet {
        let pg = postgresql(spec);
        statefulset(&Cluster::new(&pg).unwrap(), "abc123")
    }

    fn container(sts: &StatefulSet) -> Container {
        sts.spec.template.spec.as_ref().unwrap().containers[0].clone()
    }

    #[test]
    fn runs_the_official_image_of_the_requested_major() {
        assert_eq!(
            container(&build(MINIMAL)).image.unwrap(),
            "docker.io/library/postgres:18"
        );
        let sts = build("version: \"16\"\nstorage: {size: 1Gi}");
        assert_eq!(
            container(&sts).image.unwrap(),
            "docker.io/library/postgres:16"
        );
        let sts = build("image: registry.local/pg:17.2\nstorage: {size: 1Gi}");
        assert_eq!(container(&sts).image.unwrap(), "registry.local/pg:17.2");
    }

    #[test]
    fn claims_the_requested_storage() {
        let sts = build("storage: {size: 20Gi, storageClassName: fast}");
        let claim = &sts.spec.volume_claim_templates.unwrap()[0];
        let claim_spec = claim.spec.as_ref().unwrap();
        assert_eq!(claim_spec.storage_class_name.as_deref(), Some("fast"));
        let requests = claim_spec
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap();
        assert_eq!(requests["storage"], Quantity("20Gi".into()));
    }

    #[test]
    fn is_non_root_with_runtime_default_seccomp_and_read_only_root() {
        let sts = build(MINIMAL);
        let pod = sts.spec.template.spec.as_ref().unwrap();
        let pod_security = pod.security_context.as_ref().unwrap();
        assert_eq!(pod_security.run_as_non_root, Some(true));
        assert_eq!(
            pod_security.seccomp_profile.as_ref().unwrap().type_,
            "RuntimeDefault"
        );
        let security = container(&sts).security_context.unwrap();
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.capabilities.unwrap().drop.unwrap(), ["ALL"]);
    }

    #[test]
    fn probes_use_pg_isready_and_config_checksum_is_on_the_template() {
        let sts = build(MINIMAL);
        let c = container(&sts);
        let command = c.readiness_probe.unwrap().exec.unwrap().command.unwrap();
        assert_eq!(command[0], "pg_isready");
        assert!(c.liveness_probe.is_some() && c.startup_probe.is_some());
        let annotations = sts.spec.template.metadata.unwrap().annotations.unwrap();
        assert_eq!(annotations[CONFIG_CHECKSUM_ANNOTATION], "abc123");
    }

    #[test]
    fn pre_stop_requests_a_fast_shutdown_without_waiting_for_it() {
        let c = container(&build(MINIMAL));
        let hook = c.lifecycle.unwrap().pre_stop.unwrap().exec.unwrap();
        let command = hook.command.unwrap();
        assert_eq!(command[..3], ["pg_ctl", "stop", "--mode=fast"]);
        // A waiting pg_ctl is killed with the container when PostgreSQL (PID 1) exits.
        assert!(command.contains(&"--no-wait".to_owned()));
        assert!(!command.contains(&"--wait".to_owned()));
    }

    #[test]
    fn passwords_come_from_secrets_never_literals() {
        let env = container(&build(MINIMAL)).env.unwrap();
        for name in ["POSTGRES_PASSWORD", "TUSK_APP_PASSWORD"] {
            let var = env.iter().find(|e| e.name == name).unwrap();
            assert_eq!(var.value, None);
            assert!(var.value_from.as_ref().unwrap().secret_key_ref.is_some());
        }
        let pgdata = env.iter().find(|e| e.name == "PGDATA").unwrap();
        assert_eq!(pgdata.value.as_deref(), Some("/var/lib/postgresql/data"));
    }

    #[test]
    fn selector_matches_template_labels() {
        let sts = build(MINIMAL);
        let selector = sts.spec.selector.match_labels.unwrap();
        let labels = sts.spec.template.metadata.unwrap().labels.unwrap();
        assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
        assert_eq!(sts.spec.service_name.as_deref(), Some("demo-hl"));
        assert_eq!(sts.spec.replicas, Some(1));
    }
}
