//! Agent Jobs that run PostgreSQL's own programs (pg_dump, pg_restore, pg_basebackup, a
//! throwaway server) take them from the cluster's PostgreSQL image, with the agent binary
//! copied in by an init container — never from the agent image.
//!
//! Why: the programs are then of the server's own major. A newer client than the server breaks
//! in both directions: pg_restore 17 and later open every restore with `SET
//! transaction_timeout`, which servers before 17 refuse, and an archive written by pg_dump 18
//! cannot be read by the pg_restore 15 of a 15 cluster's verification. An older client cannot
//! dump or back up a newer server at all (an upgraded cluster's first base backup). The
//! server's own programs dump and back it up, and verify and restore its dumps into the same
//! or a later major, whichever major the cluster runs — no image has to bundle all of them.

use k8s_openapi::api::batch::v1::JobSpec;
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::image::POSTGRES_UID;
use super::pod::{plain_env, restricted_container_security, restricted_pod_security};
use super::{AgentSettings, Cluster};

/// Where the init container puts the agent binary, on an emptyDir.
const AGENT_BIN_DIR: &str = "/tusk/bin";
/// The agent binary in the backup-agent image (see the Dockerfile).
const AGENT_IMAGE_BINARY: &str = "/usr/local/bin/backup-agent";
const AGENT_BIN_VOLUME: &str = "agent-bin";

/// `spec`'s containers run the agent from the cluster's PostgreSQL image as its `postgres`
/// user, finding that major's programs on the image's `PATH` (the official images' contract,
/// which holds `/usr/lib/postgresql/<major>/bin`: the image, not `spec.version`, is what the
/// server runs). A pod that mounts a client key keeps its fsGroup (the key is readable through
/// the group).
pub fn in_postgres_image(cluster: &Cluster, agent: &AgentSettings, spec: &mut JobSpec) {
    let Some(pod) = spec.template.spec.as_mut() else {
        return;
    };
    let fs_group = (pod.security_context.as_ref()).is_some_and(|s| s.fs_group.is_some());
    pod.security_context = Some(restricted_pod_security(POSTGRES_UID, fs_group));
    for container in &mut pod.containers {
        container.image = Some(cluster.postgres_image());
        container.command = Some(vec![format!("{AGENT_BIN_DIR}/backup-agent")]);
        let env = container.env.get_or_insert_with(Vec::new);
        env.retain(|e| e.name != "HOME");
        env.push(plain_env("HOME", "/tmp"));
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        mounts.push(mount(AGENT_BIN_VOLUME, AGENT_BIN_DIR));
    }
    pod.volumes
        .get_or_insert_with(Vec::new)
        .push(empty_dir(AGENT_BIN_VOLUME));
    pod.init_containers
        .get_or_insert_with(Vec::new)
        .push(copy_agent(agent));
}

/// Copies the agent binary from its image into the shared emptyDir.
fn copy_agent(agent: &AgentSettings) -> Container {
    Container {
        name: "copy-agent".to_owned(),
        image: Some(agent.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![
            "cp".to_owned(),
            AGENT_IMAGE_BINARY.to_owned(),
            format!("{AGENT_BIN_DIR}/backup-agent"),
        ]),
        volume_mounts: Some(vec![mount(AGENT_BIN_VOLUME, AGENT_BIN_DIR)]),
        security_context: Some(restricted_container_security()),
        resources: Some(quantities(&[("cpu", "50m"), ("memory", "32Mi")], &[])),
        ..Container::default()
    }
}

pub(super) fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }
}

pub(super) fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

pub(super) fn quantities(
    requests: &[(&str, &str)],
    limits: &[(&str, &str)],
) -> ResourceRequirements {
    let map = |pairs: &[(&str, &str)]| {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect()
        })
    };
    ResourceRequirements {
        requests: map(requests),
        limits: map(limits),
        ..ResourceRequirements::default()
    }
}
