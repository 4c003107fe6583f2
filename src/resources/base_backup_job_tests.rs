//! Unit tests of the physical Backup's Job.

use k8s_openapi::api::core::v1::{Container, EnvVar};

use super::*;
use crate::crd::{InstanceState, PostgreSQLStatus};
use crate::resources::fixtures::*;

fn archiving(extra: &str) -> PostgreSQL {
    let spec = WITH_S3_BACKUP.replace(
        "backup:\n",
        &format!("{extra}backup:\n  walArchive: {{}}\n"),
    );
    postgresql(&spec)
}

fn owner() -> OwnerReference {
    OwnerReference {
        kind: "Backup".into(),
        name: "base1".into(),
        uid: "backup-uid".into(),
        ..OwnerReference::default()
    }
}

fn job_of(pg: &PostgreSQL) -> Job {
    let cluster = Cluster::new(pg).expect("valid cluster");
    let policy = pg.spec.backup.as_ref().expect("backup");
    let agent = AgentSettings {
        image: "tusk/backup-agent:test".into(),
    };
    let source = base_backup_source(pg, &cluster);
    base_backup_job(&cluster, policy, &agent, "base1", owner(), &source)
}

fn container(job: &Job) -> &Container {
    let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    &pod.expect("pod").containers[0]
}

fn env<'a>(job: &'a Job, name: &str) -> Option<&'a EnvVar> {
    container(job).env.as_ref()?.iter().find(|v| v.name == name)
}

fn value<'a>(job: &'a Job, name: &str) -> Option<&'a str> {
    env(job, name)?.value.as_deref()
}

fn secret_of(job: &Job, name: &str) -> Option<(String, String)> {
    let key = env(job, name)?
        .value_from
        .as_ref()?
        .secret_key_ref
        .as_ref()?;
    Some((key.name.clone(), key.key.clone()))
}

#[test]
fn it_runs_base_backup_as_the_replication_role_never_the_superuser() {
    let job = job_of(&archiving(""));
    assert_eq!(
        container(&job).args.as_deref(),
        Some(&["base-backup".to_owned()][..])
    );
    assert_eq!(job.metadata.name.as_deref(), Some("base1"));
    assert_eq!(
        job.metadata
            .owner_references
            .as_ref()
            .map(|o| o[0].uid.as_str()),
        Some("backup-uid")
    );
    assert_eq!(
        secret_of(&job, "PGUSER"),
        Some(("demo-replication".into(), "username".into()))
    );
    assert_eq!(
        secret_of(&job, "PGPASSWORD"),
        Some(("demo-replication".into(), "password".into()))
    );
    let names: Vec<&str> = container(&job)
        .env
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    for unique in ["PGHOST", "PGUSER", "PGPASSWORD"] {
        assert_eq!(
            names.iter().filter(|n| **n == unique).count(),
            1,
            "{unique}: {names:?}"
        );
    }
    let superuser = container(&job).env.iter().flatten().any(|v| {
        v.value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref())
            .is_some_and(|k| k.name == "demo-superuser")
    });
    assert!(!superuser, "the Job reads no superuser credential");
    assert_eq!(value(&job, "PGSSLMODE"), Some("verify-full"));
    // archive_timeout 5 s: twice that, plus the margin for a backlog.
    assert_eq!(value(&job, "TUSK_WAL_WAIT_SECONDS"), Some("610"));
}

#[test]
fn it_presents_the_replication_certificate_and_sees_no_server_key() {
    let job = job_of(&archiving(""));
    assert_eq!(
        value(&job, "PGSSLCERT"),
        Some("/var/run/secrets/tusk/client/tls.crt")
    );
    assert_eq!(
        value(&job, "PGSSLKEY"),
        Some("/var/run/secrets/tusk/client/tls.key")
    );
    let pod = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "client-tls")
        .and_then(|v| v.secret.as_ref())
        .expect("the replication certificate's volume");
    assert_eq!(volume.secret_name.as_deref(), Some("demo-server-tls"));
    assert_eq!(volume.default_mode, Some(0o640));
    let keys: Vec<&str> = volume
        .items
        .iter()
        .flatten()
        .map(|i| i.key.as_str())
        .collect();
    assert_eq!(keys, ["replication.crt", "replication.key"]);
    let security = pod.security_context.as_ref().expect("pod security");
    assert_eq!(
        security.fs_group,
        Some(999),
        "the key's group (the postgres image's user) may read it"
    );
    assert_eq!(security.run_as_non_root, Some(true));
}

#[test]
fn with_the_users_certificates_there_is_no_client_certificate() {
    let job = job_of(&archiving("tls: {serverSecret: my-tls}\n"));
    assert_eq!(value(&job, "PGSSLCERT"), None);
    let pod = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    assert!(!pod.volumes.iter().flatten().any(|v| v.name == "client-tls"));
}

#[test]
fn it_reads_a_ready_replica_else_the_primary() {
    let mut pg = archiving("");
    assert_eq!(value(&job_of(&pg), "PGHOST"), Some("demo-rw.prod.svc"));
    let state = |pod: &str, role: &str, ready: bool| InstanceState {
        pod: pod.into(),
        role: role.into(),
        ready,
    };
    pg.status = Some(PostgreSQLStatus {
        instance_states: vec![
            state("demo-0", "primary", true),
            state("demo-1", "replica", false),
            state("demo-2", "replica", true),
        ],
        ..PostgreSQLStatus::default()
    });
    assert_eq!(
        value(&job_of(&pg), "PGHOST"),
        Some("demo-2.demo-hl.prod.svc")
    );
}

#[test]
fn a_scheduled_base_backup_reads_the_replicas_through_ro_unless_it_is_disabled() {
    let source =
        |extra: &str| scheduled_base_backup_source(&Cluster::new(&archiving(extra)).unwrap());
    assert_eq!(source(""), "demo-rw.prod.svc", "one instance: the primary");
    assert_eq!(source("instances: 3\n"), "demo-ro.prod.svc");
    let without_ro = "instances: 3\nservices:\n  disabled: [ro]\n";
    assert_eq!(source(without_ro), "demo-rw.prod.svc");
    let without_r = "instances: 3\nservices:\n  disabled: [r]\n";
    assert_eq!(source(without_r), "demo-ro.prod.svc");
}
