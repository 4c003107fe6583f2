//! Pieces every pod Tusk creates shares: environment variables and the restricted security
//! context (Pod Security Standard `restricted`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, SeccompProfile,
    SecretKeySelector, SecurityContext, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// An environment variable with a literal value; never used for credentials.
pub fn plain_env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// An environment variable holding one of the pod's labels, read through the downward API.
pub fn pod_label_env(name: &str, label: &str) -> EnvVar {
    pod_field_env(name, &format!("metadata.labels['{label}']"))
}

/// An environment variable holding a field of the pod (`metadata.name`, …), through the
/// downward API.
pub fn pod_field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// An environment variable read from key `key` of Secret `secret`.
pub fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// The unprivileged user of the backup-agent image (also the group of a key it must read).
pub const AGENT_UID: i64 = 65532;

/// Non-root as `uid`, seccomp `RuntimeDefault`; `fs_group` owns mounted volumes when set.
pub fn restricted_pod_security(uid: i64, fs_group: bool) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        fs_group: fs_group.then_some(uid),
        fs_group_change_policy: fs_group.then(|| "OnRootMismatch".to_owned()),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

/// No privilege escalation, no capabilities, a read-only root filesystem.
pub fn restricted_container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

/// A named TCP port of a container.
pub fn tcp_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: port,
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }
}

/// An `emptyDir` volume, on `medium` (`Memory`) or the node's disk.
pub fn empty_dir(name: &str, medium: Option<&str>) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: medium.map(str::to_owned),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// A volume mounted at `path`, read-only when `read_only`.
pub fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// Prefer spreading the pods `labels` select over nodes: one node's loss then takes at most one
/// of them.
pub fn spread_over_nodes(labels: BTreeMap<String, String>) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(labels),
                            ..LabelSelector::default()
                        }),
                        topology_key: "kubernetes.io/hostname".to_owned(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}
