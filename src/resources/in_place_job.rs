//! The Job of an in-place major-version upgrade: `pg_upgrade --link` of the stopped primary's
//! volume (docs/src/design/major-upgrades.md, "In place"). Its pod runs the **new** image; an
//! init container of the **old** image copies that major's installation into an emptyDir
//! (`tusk-instance old-installation`), so stock images of any two majors work without an
//! image that bundles both. The result is the container's termination message: the new
//! system's identifier, or why pg_upgrade refused.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::image::{DATA_MOUNT, INSTANCE_MANAGER, INSTANCE_MANAGER_DIR, PGDATA, POSTGRES_UID};
use super::pod::{
    empty_dir, mount, plain_env, restricted_container_security, restricted_pod_security,
};
use super::postgres_container::installer_container_plain;
use super::storage::DATA_CLAIM;
use super::{AgentSettings, Cluster, Component};

/// Where the old installation is copied, in both containers.
const OLD_INSTALLATION: &str = "/upgrade/old";
/// The container whose termination message is the result.
pub const UPGRADE_CONTAINER: &str = "upgrade";

/// What one in-place upgrade runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InPlaceRun<'a> {
    pub from: u32,
    pub to: u32,
    pub from_image: &'a str,
    pub to_image: &'a str,
    /// The primary's pod (`<set>-<ordinal>`): its claim is the one upgraded.
    pub pod: &'a str,
}

/// `<name>-upgrade-v<to>`.
pub fn in_place_job_name(cluster: &Cluster, to: u32) -> String {
    format!("{}-upgrade-v{to}", cluster.name)
}

/// The Job upgrading `run.pod`'s volume. Two retries: an attempt cut short (its pod deleted,
/// its node lost) is resumed by the next, and a refusal is the same three times.
pub fn in_place_job(cluster: &Cluster, agent: &AgentSettings, run: &InPlaceRun) -> Job {
    let debian_bin = |major: u32| format!("/usr/lib/postgresql/{major}/bin");
    let old = Container {
        name: "old-installation".to_owned(),
        image: Some(run.from_image.to_owned()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![
            INSTANCE_MANAGER.to_owned(),
            "old-installation".to_owned(),
            OLD_INSTALLATION.to_owned(),
            "--bin-dir".to_owned(),
            debian_bin(run.from),
        ]),
        security_context: Some(restricted_container_security()),
        volume_mounts: Some(vec![
            mount("tusk-bin", INSTANCE_MANAGER_DIR, true),
            mount("old", OLD_INSTALLATION, false),
        ]),
        ..Container::default()
    };
    let upgrade = Container {
        name: UPGRADE_CONTAINER.to_owned(),
        image: Some(run.to_image.to_owned()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![
            INSTANCE_MANAGER.to_owned(),
            "upgrade-in-place".to_owned(),
            "--old".to_owned(),
            OLD_INSTALLATION.to_owned(),
            "--pgdata".to_owned(),
            PGDATA.to_owned(),
            "--bin-dir".to_owned(),
            debian_bin(run.to),
            "--report".to_owned(),
            "/dev/termination-log".to_owned(),
        ]),
        env: Some(vec![plain_env("HOME", "/tmp")]),
        // pg_upgrade works in a directory beside PGDATA on the same volume.
        working_dir: Some(DATA_MOUNT.to_owned()),
        security_context: Some(restricted_container_security()),
        volume_mounts: Some(vec![
            mount("data", DATA_MOUNT, false),
            mount("tusk-bin", INSTANCE_MANAGER_DIR, true),
            mount("old", OLD_INSTALLATION, true),
            mount("tmp", "/tmp", false),
            mount("run", "/var/run/postgresql", false),
        ]),
        ..Container::default()
    };
    let claim = format!("{DATA_CLAIM}-{}", run.pod);
    let volumes = vec![
        Volume {
            name: "data".to_owned(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim,
                read_only: Some(false),
            }),
            ..Volume::default()
        },
        empty_dir("tusk-bin", None),
        empty_dir("old", None),
        empty_dir("tmp", None),
        empty_dir("run", None),
    ];
    let labels = cluster.labels(Component::Upgrade);
    Job {
        metadata: cluster.child_meta(in_place_job_name(cluster, run.to), Component::Upgrade),
        spec: Some(JobSpec {
            backoff_limit: Some(2),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    init_containers: Some(vec![installer_container_plain(agent), old]),
                    containers: vec![upgrade],
                    restart_policy: Some("Never".to_owned()),
                    automount_service_account_token: Some(false),
                    enable_service_links: Some(false),
                    security_context: Some(restricted_pod_security(POSTGRES_UID, true)),
                    volumes: Some(volumes),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::postgresql;
    use super::*;

    #[test]
    fn the_job_upgrades_the_primarys_claim_with_the_old_installation_copied_in() {
        let pg = postgresql("version: \"17\"\ninstances: 3\nstorage: {size: 1Gi}");
        let cluster = Cluster::new(&pg).expect("a cluster");
        let agent = AgentSettings {
            image: "agent:test".into(),
        };
        let run = InPlaceRun {
            from: 15,
            to: 17,
            from_image: "postgres:15",
            to_image: "postgres:17",
            pod: "demo-1",
        };
        let job = in_place_job(&cluster, &agent, &run);
        assert_eq!(job.metadata.name.as_deref(), Some("demo-upgrade-v17"));
        let spec = job.spec.expect("a spec");
        assert_eq!(spec.backoff_limit, Some(2));
        let pod = spec.template.spec.expect("a pod");
        let claim = (pod.volumes.iter().flatten())
            .find_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.clone());
        assert_eq!(claim.as_deref(), Some("data-demo-1"));
        let inits = pod.init_containers.expect("init containers");
        assert_eq!(inits[1].image.as_deref(), Some("postgres:15"));
        assert!(
            (inits[1].command.iter().flatten()).any(|a| a == "/usr/lib/postgresql/15/bin"),
            "{:?}",
            inits[1].command
        );
        let main = &pod.containers[0];
        assert_eq!(main.image.as_deref(), Some("postgres:17"));
        let command = main.command.clone().unwrap_or_default().join(" ");
        assert!(
            command.contains("upgrade-in-place --old /upgrade/old"),
            "{command}"
        );
        assert!(
            command.contains("--report /dev/termination-log"),
            "{command}"
        );
        let security = pod.security_context.expect("pod security");
        assert_eq!(security.run_as_non_root, Some(true));
    }
}
