use super::*;
use crate::runtime::secret_facts::SecretStore;

#[test]
fn exposes_reconciles_by_result_and_duration() {
    let metrics = Metrics::default();
    metrics.reconciled("success", Duration::from_millis(20));
    metrics.reconciled("success", Duration::from_millis(30));
    metrics.reconciled("ApplyFailed", Duration::from_millis(30));
    metrics.child_written("StatefulSet", "created");
    metrics.count_phases(std::iter::empty());
    let text = metrics.encode();
    assert!(
        text.contains("tusk_reconcile_total{result=\"success\"} 2"),
        "{text}"
    );
    assert!(text.contains("tusk_reconcile_total{result=\"ApplyFailed\"} 1"));
    assert!(text.contains("tusk_reconcile_duration_seconds_count 3"));
    assert!(text.contains("tusk_child_writes_total{kind=\"StatefulSet\",change=\"created\"} 1"));
    assert!(text.contains("tusk_clusters{phase=\"Ready\"} 0"));
}

/// Cluster prod/demo with `status`.
fn demo_with_status(status: serde_json::Value) -> PostgreSQL {
    let spec = serde_json::json!({"storage": {"size": "1Gi"}});
    crate::crd::fixtures::postgresql("prod", "demo", spec, status)
}

#[test]
fn last_successful_and_verified_backup_times_per_cluster() {
    let pg = demo_with_status(serde_json::json!({
        "lastSuccessfulBackup": {"name": "b1", "completedAt": "2026-11-22T02:00:00Z"},
        "lastVerifiedBackup": {"name": "b0", "verifiedAt": "2026-11-22T04:00:00Z"},
    }));
    let metrics = Metrics::default();
    metrics.record_backup_times([&pg]);
    let text = metrics.encode();
    let labels = "{namespace=\"prod\",cluster=\"demo\"}";
    for line in [
        format!("tusk_last_successful_backup_timestamp_seconds{labels} 1795312800"),
        format!("tusk_last_verified_backup_timestamp_seconds{labels} 1795320000"),
    ] {
        assert!(text.contains(&line), "{line} in {text}");
    }
    metrics.record_backup_times([]);
    assert!(!metrics.encode().contains("cluster=\"demo\""));
}

#[test]
fn backups_of_a_running_schedule_are_overdue_two_runs_and_half_an_interval_after_the_last_success()
{
    let mut pg = demo_with_status(serde_json::json!({
        "lastSuccessfulBackup": {"name": "b1", "completedAt": "2026-11-20T02:10:00Z"},
        "conditions": [{"type": "BackupScheduled", "status": "True", "reason": "Scheduled",
            "message": "", "lastTransitionTime": "2026-11-01T00:00:00Z"}],
    }));
    pg.spec.backup = serde_json::from_value(serde_json::json!({
        "schedule": "0 2 * * *", "destination": {"gcs": {"bucket": "b"}},
    }))
    .unwrap();
    let metrics = Metrics::default();
    metrics.record_backup_times([&pg]);
    // 2026-11-22T14:00:00Z: runs on the 21st and 22nd at 02:00, plus half a day.
    let line =
        "tusk_backup_overdue_timestamp_seconds{namespace=\"prod\",cluster=\"demo\"} 1795356000";
    assert!(metrics.encode().contains(line), "{}", metrics.encode());
    if let Some(policy) = pg.spec.backup.as_mut() {
        policy.suspend = true;
    }
    metrics.record_backup_times([&pg]);
    assert!(
        !metrics
            .encode()
            .contains("tusk_backup_overdue_timestamp_seconds{")
    );
}

#[test]
fn deleted_clusters_leave_the_phase_gauge_at_the_next_scrape() {
    use kube::runtime::watcher::Event;
    let pg = demo_with_status(serde_json::json!({"phase": "Ready"}));
    let (cache, mut writer) = kube::runtime::reflector::store();
    writer.apply_watcher_event(&Event::Apply(pg.clone()));
    let metrics = Metrics::default();
    metrics.watch_clusters(cache);
    assert!(
        metrics
            .encode()
            .contains("tusk_clusters{phase=\"Ready\"} 1")
    );
    writer.apply_watcher_event(&Event::Delete(pg));
    assert!(
        metrics
            .encode()
            .contains("tusk_clusters{phase=\"Ready\"} 0")
    );
}

#[test]
fn each_clusters_server_certificate_expiry_is_exported_and_leaves_with_its_secret() {
    let pg = crate::crd::PostgreSQL::new(
        "demo",
        serde_json::from_value(serde_json::json!({"storage": {"size": "1Gi"}})).unwrap(),
    );
    let mut pg = pg;
    pg.metadata.namespace = Some("prod".into());
    pg.metadata.uid = Some("uid-demo".into());
    let cluster = crate::resources::Cluster::new(&pg).unwrap();
    let pem = tls::Pem {
        cert: "c".into(),
        key: "k".into(),
    };
    let not_after = time::OffsetDateTime::from_unix_timestamp(1_900_000_000).unwrap();
    let issued = tls::ServerCertificates {
        server: pem.clone(),
        replication: pem,
        upgrade: None,
    };
    let secret = tls::server_secret(&cluster, &issued, "ca", not_after);
    // Secrets without a recorded expiry (passwords, the CA) have no series.
    let password = crate::resources::app_secret(&cluster, "pw");
    // Read from the Secret cache, as the operator's scrapes do.
    let metrics = Metrics::default();
    metrics.watch_secrets(SecretStore::of([secret, password.clone()]));
    let text = metrics.encode();
    assert!(
        text.contains(
            "tusk_server_certificate_expiry_timestamp_seconds{namespace=\"prod\",cluster=\"demo\"} 1900000000"
        ),
        "{text}"
    );
    let metrics = Metrics::default();
    metrics.watch_secrets(SecretStore::of([password]));
    assert!(
        !metrics
            .encode()
            .contains("tusk_server_certificate_expiry_timestamp_seconds{")
    );
}

#[test]
fn clusters_reconciled_counts_each_cached_cluster_once_and_forgets_the_deleted() {
    let cluster = |name: &str, uid: &str| {
        let spec = serde_json::json!({"storage": {"size": "1Gi"}});
        let mut pg = crate::crd::fixtures::postgresql("prod", name, spec, serde_json::json!({}));
        pg.metadata.uid = Some(uid.to_owned());
        pg
    };
    let (a, b, c) = (
        cluster("a", "uid-a"),
        cluster("b", "uid-b"),
        cluster("c", "uid-c"),
    );
    let metrics = Metrics::default();
    for uid in ["uid-a", "uid-a", "uid-a", "uid-b"] {
        metrics.cluster_reconciled(uid);
    }
    metrics.count_reconciled([&a, &b, &c]);
    assert!(metrics.encode().contains("tusk_clusters_reconciled 2\n"));
    // b deleted: it leaves the count, and a later cluster with b's name is a new one.
    metrics.count_reconciled([&a, &c]);
    assert!(metrics.encode().contains("tusk_clusters_reconciled 1\n"));
    metrics.cluster_reconciled("uid-c");
    metrics.count_reconciled([&a, &c]);
    assert!(metrics.encode().contains("tusk_clusters_reconciled 2\n"));
}
