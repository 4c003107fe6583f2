//! Unit tests of the verification Job.

use super::*;
use crate::resources::fixtures::*;
use k8s_openapi::api::core::v1::Container;

fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "tusk.dev/v1alpha1".into(),
        kind: "Backup".into(),
        name: "nightly".into(),
        uid: "backup-uid".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }
}

fn build(spec: &str) -> Job {
    let pg = postgresql(spec);
    let cluster = Cluster::new(&pg).expect("valid cluster");
    let destination = &pg.spec.backup.as_ref().expect("backup").destination;
    let agent = AgentSettings {
        image: "ghcr.io/tusk-operator/backup-agent:dev".into(),
    };
    let run = VerifyRun {
        backup_id: "nightly",
        destination,
        request: "2026-11-23",
        deadline_seconds: 3600,
    };
    verify_job(&cluster, &agent, &run, owner())
}

fn env_value<'a>(container: &'a Container, name: &str) -> Option<&'a str> {
    let env = container.env.as_ref()?;
    env.iter().find(|e| e.name == name)?.value.as_deref()
}

#[test]
fn runs_verify_restore_in_the_clusters_postgres_image_as_its_postgres_user() {
    let job = build(WITH_S3_BACKUP);
    let spec = job.spec.as_ref().expect("spec");
    let pod = spec.template.spec.as_ref().expect("pod");
    let main = &pod.containers[0];
    assert_eq!(main.name, "backup-agent");
    assert_eq!(main.image.as_deref(), Some("docker.io/library/postgres:18"));
    assert_eq!(
        main.command.as_deref(),
        Some(&["/tusk/bin/backup-agent".to_owned()][..])
    );
    assert_eq!(
        main.args.as_deref(),
        Some(
            &[
                "verify-restore".to_owned(),
                "--backup-id".into(),
                "nightly".into()
            ][..]
        )
    );
    let security = pod.security_context.as_ref().expect("pod security");
    assert_eq!(
        (security.run_as_user, security.run_as_group),
        (Some(999), Some(999))
    );
    assert_eq!(security.run_as_non_root, Some(true));
    let container_security = main.security_context.as_ref().expect("container security");
    assert_eq!(container_security.read_only_root_filesystem, Some(true));
    let init = &pod.init_containers.as_ref().expect("init containers")[0];
    assert_eq!(
        init.image.as_deref(),
        Some("ghcr.io/tusk-operator/backup-agent:dev")
    );
    assert_eq!(
        init.command.as_deref(),
        Some(
            &[
                "cp".to_owned(),
                "/usr/local/bin/backup-agent".into(),
                "/tusk/bin/backup-agent".into()
            ][..]
        )
    );
}

#[test]
fn a_custom_image_is_used_and_its_programs_found_on_its_path() {
    let spec = format!("{WITH_S3_BACKUP}\nversion: \"16\"\nimage: registry.local/pg:16.4\n");
    let job = build(&spec);
    let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let main = &pod.expect("pod").containers[0];
    assert_eq!(main.image.as_deref(), Some("registry.local/pg:16.4"));
    // The image's PATH names its major's programs: the image, not spec.version, is what runs.
    assert_eq!(env_value(main, "TUSK_PG_BIN_DIR"), None);
}

#[test]
fn reads_the_store_but_never_connects_to_the_source_cluster() {
    let job = build(WITH_S3_BACKUP);
    let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let main = &pod.expect("pod").containers[0];
    let names: Vec<&str> = main.env.iter().flatten().map(|e| e.name.as_str()).collect();
    assert!(names.contains(&"TUSK_STORE") && names.contains(&"TUSK_BUCKET"));
    assert!(!names.iter().any(|n| n.starts_with("PG")), "{names:?}");
    assert_eq!(env_value(main, "TUSK_BACKUP_ID"), Some("nightly"));
    assert_eq!(env_value(main, "TUSK_SCRATCH_DIR"), Some("/scratch"));
    assert_eq!(
        env_value(main, "TUSK_TERMINATION_LOG"),
        Some("/dev/termination-log")
    );
    // No literal credential anywhere: only references to Secrets.
    assert!(
        main.env
            .iter()
            .flatten()
            .filter(|e| e.name.starts_with("AWS_"))
            .all(|e| e.value.is_none())
    );
}

#[test]
fn scratch_and_tmp_are_empty_dirs_and_there_is_no_claim() {
    let job = build(WITH_S3_BACKUP);
    let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let volumes = pod.and_then(|p| p.volumes.as_ref()).expect("volumes");
    for name in ["scratch", "tmp", "agent-bin"] {
        let volume = volumes.iter().find(|v| v.name == name).expect(name);
        assert!(volume.empty_dir.is_some(), "{name}");
    }
    assert!(volumes.iter().all(|v| v.persistent_volume_claim.is_none()));
}

#[test]
fn one_attempt_with_a_deadline_limits_and_the_backup_as_owner() {
    let job = build(WITH_S3_BACKUP);
    let spec = job.spec.as_ref().expect("spec");
    assert_eq!(spec.backoff_limit, Some(0));
    assert_eq!(spec.active_deadline_seconds, Some(3600));
    let main = &spec.template.spec.as_ref().expect("pod").containers[0];
    let resources = main.resources.as_ref().expect("resources");
    assert!(
        resources
            .requests
            .as_ref()
            .is_some_and(|r| r.contains_key("memory"))
    );
    assert!(
        resources
            .limits
            .as_ref()
            .is_some_and(|l| l.contains_key("memory"))
    );
    assert_eq!(job.metadata.name.as_deref(), Some("nightly-verify"));
    let owners = job.metadata.owner_references.as_ref().expect("owners");
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("Backup", "backup-uid")
    );
    let labels = job.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels["app.kubernetes.io/component"], "verify");
    assert_eq!(labels["tusk.dev/cluster"], "demo");
    let annotations = job.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(annotations["tusk.dev/verify"], "2026-11-23");
}

#[test]
fn the_job_name_fits_63_characters() {
    assert_eq!(verify_job_name("nightly"), "nightly-verify");
    let long = format!("{}-{}", "a".repeat(55), "b".repeat(7));
    let name = verify_job_name(&long);
    assert!(name.len() <= 63, "{name}");
    assert!(name.ends_with("-verify") && !name.contains("--"));
}
