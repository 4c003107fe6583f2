//! The alert rules and the Grafana dashboard of the Helm chart query only metrics the operator
//! registers: a renamed metric breaks this test instead of silently emptying an alert.

use std::collections::BTreeSet;
use std::path::Path;

use tusk::PostgreSQL;
use tusk::metrics::Metrics;

/// Every `tusk_*` metric name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("tusk_") {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The family a sample name belongs to, as `# TYPE` lines name it.
fn family(name: &str) -> &str {
    ["_total", "_bucket", "_count", "_sum"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name)
}

/// Metrics with a series in every family (families without one are not exposed at all).
fn every_family() -> Metrics {
    let cluster: PostgreSQL = serde_json::from_value(serde_json::json!({
        "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
        "metadata": {"name": "demo", "namespace": "prod", "uid": "uid-demo"},
        "spec": {"storage": {"size": "1Gi"},
            "backup": {"schedule": "@daily", "destination": {"gcs": {"bucket": "b"}}}},
        "status": {
            "lastSuccessfulBackup": {"name": "b1", "completedAt": "2026-11-20T02:10:00Z"},
            "lastVerifiedBackup": {"name": "b1", "verifiedAt": "2026-11-20T04:00:00Z"},
            "conditions": [{"type": "BackupScheduled", "status": "True", "reason": "Scheduled",
                "message": "", "lastTransitionTime": "2026-11-01T00:00:00Z"}],
        },
    }))
    .expect("a valid cluster");
    let metrics = Metrics::default();
    metrics.reconciled("success", std::time::Duration::from_millis(5));
    metrics.backup_reconciled("success");
    metrics.backup_finished("Completed");
    metrics.verification_finished("Verified", Some(60.0));
    metrics.child_written("Secret", "created");
    metrics.first_ready(std::time::Duration::from_secs(30));
    metrics.count_phases([&cluster]);
    metrics.record_backup_times([&cluster]);
    let tusk_cluster = tusk::resources::Cluster::new(&cluster).expect("cluster");
    let pem = tusk::resources::tls::Pem {
        cert: "c".into(),
        key: "k".into(),
    };
    let not_after = time::OffsetDateTime::from_unix_timestamp(1_900_000_000).expect("time");
    let issued = tusk::resources::tls::ServerCertificates {
        server: pem.clone(),
        replication: pem,
        upgrade: None,
    };
    let server = tusk::resources::tls::server_secret(&tusk_cluster, &issued, "ca", not_after);
    metrics.record_certificate_expiry([&server]);
    metrics
}

#[test]
fn alerts_and_dashboard_query_only_registered_metrics() {
    let files = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/helm/tusk/files");
    let exposition = every_family().encode();
    for file in ["prometheus-rules.yaml", "grafana-dashboard.json"] {
        let text = std::fs::read_to_string(files.join(file)).expect("the chart's file exists");
        let names = metric_names(&text);
        assert!(names.len() >= 4, "{file} queries {names:?}");
        // The instance managers' and poolers' metrics are checked by their own crate
        // (instance/src/metrics.rs, instance/src/pooler/metrics.rs).
        let own = |n: &&String| !n.starts_with("tusk_instance_") && !n.starts_with("tusk_pooler_");
        for name in names.iter().filter(own) {
            let declared = format!("# TYPE {} ", family(name));
            assert!(
                exposition.contains(&declared),
                "{file} queries {name}, which the operator does not export:\n{exposition}"
            );
        }
    }
}

/// Every alert links its runbook: a `## Name` section of the book's runbook page, so whoever
/// is paged lands on what the alert means and what to do.
#[test]
fn every_alert_links_its_runbook() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules = std::fs::read_to_string(root.join("deploy/helm/tusk/files/prometheus-rules.yaml"))
        .expect("the chart's rules");
    let runbooks = std::fs::read_to_string(root.join("docs/src/monitoring/runbooks.md"))
        .expect("the runbook page");
    let page = "https://github.com/tusk-operator/tusk/blob/main/docs/src/monitoring/runbooks.md";
    let mut alerts = 0;
    for block in rules.split("- alert: ").skip(1) {
        alerts += 1;
        let name = block.split_whitespace().next().unwrap_or_default();
        let want = format!("runbook_url: {page}#{}", name.to_lowercase());
        assert!(block.contains(&want), "{name} has no `{want}`");
        assert!(
            runbooks.lines().any(|l| l.trim() == format!("## {name}")),
            "docs/src/monitoring/runbooks.md has no `## {name}` section"
        );
    }
    assert!(alerts >= 10, "{alerts} alerts found");
}
