//! The Job that verifies one backup: `backup-agent verify-restore` restores it into a throwaway
//! server inside its own pod and checks it. The pod runs the cluster's own PostgreSQL image (the
//! server binaries of the backup's major) with the agent binary copied in by an init container,
//! so no image bundles every major.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::agent::{AgentPod, job_spec};
use super::pod::plain_env;
use super::server_tools::{empty_dir, in_postgres_image, mount, quantities};
use super::{AgentSettings, Cluster, Component, Layout, store_environment};
use crate::crd::{Destination, VERIFY_ANNOTATION};

/// `spec.backup.verify.jobDeadlineSeconds` when unset: a restore plus amcheck and counts.
pub const DEFAULT_VERIFY_DEADLINE_SECONDS: i64 = 6 * 3600;
/// The throwaway server's data, socket and downloads: an emptyDir, never a volume that outlives
/// the pod.
const SCRATCH_DIR: &str = "/scratch";
/// Longest Kubernetes object name that is also a label value (`job-name`).
const MAX_NAME: usize = 63;
const SUFFIX: &str = "-verify";

/// The name of the verification Job of Backup `backup`: `<backup>-verify`, the Backup's name
/// shortened (without a trailing '-') when it would pass 63 characters.
pub fn verify_job_name(backup: &str) -> String {
    let mut keep = backup.len().min(MAX_NAME - SUFFIX.len());
    while !backup.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{SUFFIX}", backup[..keep].trim_end_matches('-'))
}

/// What one verification Job verifies, and for which request.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyRun<'a> {
    /// Backup id (the Backup's name) in the cluster's prefix of `destination`.
    pub backup_id: &'a str,
    pub destination: &'a Destination,
    /// The `tusk.dev/verify` value this run answers, kept on the Job.
    pub request: &'a str,
    pub deadline_seconds: i64,
}

/// Job [`verify_job_name`] verifying one backup of `cluster`, owned by the Backup (`owner`) so
/// it goes with it. No retries: a failed verification is a result, not a flake.
pub fn verify_job(
    cluster: &Cluster,
    agent: &AgentSettings,
    run: &VerifyRun,
    owner: OwnerReference,
) -> Job {
    let VerifyRun {
        backup_id,
        destination,
        request,
        deadline_seconds,
    } = *run;
    // The throwaway server is reached on a socket in its scratch directory: the pod gets no
    // connection settings and no credentials of the source cluster.
    let (mut env, mut volumes, mut mounts) = store_environment(&Layout::of(cluster), destination);
    env.extend([
        plain_env("TUSK_BACKUP_ID", backup_id),
        plain_env("TUSK_SCRATCH_DIR", SCRATCH_DIR),
    ]);
    volumes.push(empty_dir("scratch"));
    mounts.push(mount("scratch", SCRATCH_DIR));
    let pod = AgentPod {
        args: vec![
            "verify-restore".to_owned(),
            "--backup-id".to_owned(),
            backup_id.to_owned(),
        ],
        env,
        volumes,
        mounts,
        component: Component::Verify,
    };
    let mut spec = job_spec(cluster, agent, pod, 0, deadline_seconds);
    // The throwaway server and pg_restore are the backup's major: the cluster's own image.
    in_postgres_image(cluster, agent, &mut spec);
    if let Some(pod) = spec.template.spec.as_mut() {
        for container in &mut pod.containers {
            container.resources = Some(resources());
        }
    }
    let mut metadata = cluster.child_meta(verify_job_name(backup_id), Component::Verify);
    metadata.owner_references = Some(vec![owner]);
    metadata.annotations = Some([(VERIFY_ANNOTATION.to_owned(), request.to_owned())].into());
    Job {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// A server, pg_restore and pg_amcheck in one pod: bounded memory, CPU as available.
fn resources() -> ResourceRequirements {
    quantities(
        &[("cpu", "250m"), ("memory", "512Mi")],
        &[("cpu", "2"), ("memory", "2Gi")],
    )
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
