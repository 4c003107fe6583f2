//! Pieces every pod Tusk creates shares: environment variables and the restricted security
//! context (Pod Security Standard `restricted`).

use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector,
    PodSecurityContext, SeccompProfile, SecretKeySelector, SecurityContext, Volume,
};

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
