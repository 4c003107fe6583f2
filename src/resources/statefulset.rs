//! The StatefulSet running PostgreSQL from the official image (or a compatible override).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, KeyToPath, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec,
    PodTemplateSpec, SecretVolumeSource, Volume, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::archive::{manager_store, wal_archiving};
use super::image::POSTGRES_UID;
use super::pod::{empty_dir, restricted_pod_security, spread_over_nodes};
use super::postgres_container::{installer_container, postgres_container};
use super::{AgentSettings, Cluster, Component, STATUS_TLS_LABEL};

/// Annotation on the pod template carrying the ConfigMap checksum.
pub const CONFIG_CHECKSUM_ANNOTATION: &str = "tusk.dev/config-checksum";

/// StatefulSet `<name>`; `config_checksum` is the ConfigMap's [`super::config_checksum`], `agent`
/// the image the instance manager is copied from.
pub fn statefulset(cluster: &Cluster, config_checksum: &str, agent: &AgentSettings) -> StatefulSet {
    let spec = cluster.spec;
    let selector = cluster.set_selector_labels();
    let volume_claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data".to_owned()),
            labels: Some(selector.clone()),
            // Copied onto each claim the StatefulSet creates: the claims belong to the
            // PostgreSQL, not to the StatefulSet, so they go with the cluster and outlive a
            // StatefulSet deleted by hand (see the retention policy below).
            owner_references: Some(vec![cluster.claim_owner()]),
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
            replicas: Some(if cluster.stopped_for_upgrade {
                0
            } else {
                cluster.kept_pods()
            }),
            service_name: Some(cluster.headless_service_name()),
            selector: LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            },
            // Replicas clone from whichever pod holds the Lease, so they need not wait for
            // lower ordinals; after a failover ordinal 0 may well be a replica.
            pod_management_policy: Some("Parallel".to_owned()),
            // The claims are owned by the PostgreSQL (their template's owner reference), so
            // deleting it deletes them: backups, not PVCs, are what outlives a cluster (see
            // spec.backup.onDelete). Deleting only the StatefulSet keeps them; with `Delete`
            // here a `kubectl delete statefulset` emptied every volume and the cluster, whose
            // Lease remembers it bootstrapped, could never start again.
            persistent_volume_claim_retention_policy: Some(claim_retention(true)),
            // A replicated cluster restarts its pods itself, replicas first and the primary
            // last after a switchover (clusters/ha/rollout_plan.rs): the StatefulSet's own rolling
            // update goes by ordinal and knows nothing of roles.
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some(
                    if spec.instances > 1 {
                        "OnDelete"
                    } else {
                        "RollingUpdate"
                    }
                    .to_owned(),
                ),
                rolling_update: None,
            }),
            template: pod_template(cluster, config_checksum, agent),
            volume_claim_templates: Some(vec![volume_claim]),
            ..StatefulSetSpec::default()
        },
        status: None,
    }
}

/// The retention policy for claims that carry the PostgreSQL's owner reference (`owned`), or for
/// a StatefulSet created before they did, whose claims the StatefulSet must still take with it.
pub fn claim_retention(owned: bool) -> StatefulSetPersistentVolumeClaimRetentionPolicy {
    StatefulSetPersistentVolumeClaimRetentionPolicy {
        when_deleted: Some(if owned { "Retain" } else { "Delete" }.to_owned()),
        when_scaled: Some("Retain".to_owned()),
    }
}

/// `labels` with [`STATUS_TLS_LABEL`]: the operator reads these pods' managers over TLS.
fn status_tls(mut labels: BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels.insert(STATUS_TLS_LABEL.to_owned(), "true".to_owned());
    labels
}

fn pod_template(
    cluster: &Cluster,
    config_checksum: &str,
    agent: &AgentSettings,
) -> PodTemplateSpec {
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
    let secret_volume = |name: &str, secret: String, mode: i32| Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret),
            default_mode: Some(mode),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mut volumes = vec![
        config_volume(
            "config",
            &["postgresql.conf", "pg_hba.conf", "pg_ident.conf"],
            0o444,
        ),
        empty_dir("tusk-bin", None),
        empty_dir("run", None),
        empty_dir("tmp", None),
        // Root-owned, group fsGroup, 0640: the modes PostgreSQL accepts for a key file
        // it does not own. The kubelet refreshes the files when the Secret changes.
        secret_volume("tls", cluster.server_tls_secret_name(), 0o640),
        // The status token, for the manager to check requests against (group fsGroup).
        secret_volume("status-token", cluster.monitoring_secret_name(), 0o440),
        // The declared passwords' verifiers (never a password), for the primary's manager.
        secret_volume("verifiers", cluster.verifiers_secret_name(), 0o440),
        // PostgreSQL's parallel queries use POSIX shared memory; the runtime's 64 MiB
        // /dev/shm is too small for them.
        empty_dir("shm", Some("Memory")),
    ];
    // The bucket's CA bundle or GCS key, for the manager's WAL archiver.
    if let Some(archiving) = wal_archiving(cluster) {
        volumes.extend(manager_store(cluster, &archiving).1);
    }
    // The restore source's CA bundle or GCS key, for the agent the manager runs to restore.
    if let Some(restore) = super::point_in_time(cluster) {
        volumes.extend(super::point_in_time::restore_environment(cluster, &restore).1);
    }
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(status_tls(set_labels(cluster))),
            annotations: Some(BTreeMap::from([(
                CONFIG_CHECKSUM_ANNOTATION.to_owned(),
                config_checksum.to_owned(),
            )])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            init_containers: Some(vec![installer_container(cluster, agent)]),
            containers: vec![postgres_container(cluster)],
            // The manager reads and renews the primary Lease with this account's token.
            service_account_name: Some(cluster.instance_account_name()),
            automount_service_account_token: Some(true),
            affinity: Some(spread_over_nodes(
                cluster.selector_labels(Component::Database),
            )),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(60),
            security_context: Some(restricted_pod_security(POSTGRES_UID, true)),
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
    }
}

/// The pods' labels: the database pods', and the set's where its selector has it.
fn set_labels(cluster: &Cluster) -> BTreeMap<String, String> {
    let mut labels = cluster.labels(Component::Database);
    labels.extend(cluster.set_selector_labels());
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    fn build(spec: &str) -> StatefulSet {
        let pg = postgresql(spec);
        let agent = AgentSettings {
            image: "ghcr.io/tusk/backup-agent:test".into(),
        };
        statefulset(&Cluster::new(&pg).unwrap(), "abc123", &agent)
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
    fn pods_are_non_root_with_runtime_default_seccomp_and_their_own_account() {
        let sts = build(MINIMAL);
        let pod = sts.spec.template.spec.as_ref().unwrap();
        let pod_security = pod.security_context.as_ref().unwrap();
        assert_eq!(pod_security.run_as_non_root, Some(true));
        assert_eq!(
            pod_security.seccomp_profile.as_ref().unwrap().type_,
            "RuntimeDefault"
        );
        assert_eq!(pod.service_account_name.as_deref(), Some("demo-instance"));
        let init = pod.init_containers.as_ref().unwrap();
        assert_eq!(init[0].name, "install-instance-manager");
    }

    #[test]
    fn instances_start_in_parallel_spread_over_nodes() {
        let sts = build("instances: 3\nstorage: {size: 1Gi}");
        assert_eq!(sts.spec.replicas, Some(3));
        let strategy = sts
            .spec
            .update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref());
        assert_eq!(
            strategy,
            Some("OnDelete"),
            "the operator rolls replicas first"
        );
        assert_eq!(sts.spec.pod_management_policy.as_deref(), Some("Parallel"));
        let pod = sts.spec.template.spec.unwrap();
        let anti = pod.affinity.unwrap().pod_anti_affinity.unwrap();
        let term = &anti
            .preferred_during_scheduling_ignored_during_execution
            .unwrap()[0];
        assert_eq!(
            term.pod_affinity_term.topology_key,
            "kubernetes.io/hostname"
        );
    }

    #[test]
    fn selector_matches_template_labels_and_config_checksum_is_on_the_template() {
        let sts = build(MINIMAL);
        let selector = sts.spec.selector.match_labels.unwrap();
        let template = sts.spec.template.metadata.unwrap();
        let labels = template.labels.unwrap();
        assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
        // The operator sets the role label on pods; in the template it would fight the Lease.
        assert!(!labels.contains_key(crate::resources::ROLE_LABEL));
        assert_eq!(sts.spec.service_name.as_deref(), Some("demo-hl"));
        assert_eq!(sts.spec.replicas, Some(1));
        let annotations = template.annotations.unwrap();
        assert_eq!(annotations[CONFIG_CHECKSUM_ANNOTATION], "abc123");
    }

    #[test]
    fn scale_down_keeps_the_primarys_pod_until_a_switchover_moved_it() {
        let mut pg = postgresql("instances: 1\nstorage: {size: 1Gi}");
        let status = pg.status.get_or_insert_default();
        status.current_primary = Some("demo-2".into());
        let agent = AgentSettings {
            image: "ghcr.io/tusk/backup-agent:test".into(),
        };
        let sts = statefulset(&Cluster::new(&pg).unwrap(), "abc123", &agent);
        assert_eq!(sts.spec.replicas, Some(3));
        if let Some(status) = pg.status.as_mut() {
            status.current_primary = Some("demo-0".into());
        }
        let sts = statefulset(&Cluster::new(&pg).unwrap(), "abc123", &agent);
        assert_eq!(sts.spec.replicas, Some(1));
    }
}
