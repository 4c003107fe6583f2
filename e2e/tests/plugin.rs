//! L4: the `kubectl tusk` plugin as a user runs it — the built binary (TUSK_KUBECTL_TUSK_BIN,
//! which e2e/local/run.sh builds) against the scenario's cluster, its output asserted.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ListParams;
use tusk_e2e::plugin::{kubectl_tusk, ok};
use tusk_e2e::{Context, Ctx, Result, ensure, say, scenario};

fn expect_lines(output: &str, wanted: &[&str]) -> Result {
    for line in wanted {
        ensure!(output.contains(line), "no {line:?} in:\n{output}");
    }
    Ok(())
}

/// `status` shows the Ready cluster with its conditions, instance, endpoint and schedule;
/// `backup --wait` prints each phase and exits 0 on Completed; the next `status` lists the
/// backup with its size; `restore --dry-run` prints a PostgreSQL restoring it, applying nothing.
#[scenario]
async fn kubectl_tusk_status_backup_wait_and_restore_dry_run(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let ns = ctx.ns.clone();
    ctx.serving_lifecycle_db(5, "Retain").await?;
    ctx.wait_condition_in(&ns, "db", "BackupScheduled", "True")
        .await?;
    // The major the cluster runs (the real node's test image replaces the suite's).
    let version = ctx.postgresql_in(&ns, "db").await?.spec.version.major();
    let status = ok(&["status", "db", "-n", &ns]).await?;
    say(format!("kubectl tusk status db:\n{status}"));
    expect_lines(
        &status,
        &[
            &format!("PostgreSQL {ns}/db: Ready, 1/1 instances ready, PostgreSQL {version}"),
            "Ready ",
            "BackupScheduled ",
            "db-0  primary  true   Running",
            &format!("db-rw.{ns}.svc:5432  read-write (primary)"),
            "Schedule:     0 2 * * * (UTC), next run ",
            "last successful backup: none yet",
        ],
    )?;

    let backup = ok(&[
        "backup",
        "db",
        "-n",
        &ns,
        "--name",
        "b1",
        "--wait",
        "--timeout",
        "5m",
    ])
    .await?;
    say(format!(
        "kubectl tusk backup db --name b1 --wait:\n{backup}"
    ));
    let lines: Vec<&str> = backup.lines().collect();
    ensure!(
        lines.first() == Some(&format!("Backup {ns}/b1 created for PostgreSQL db").as_str()),
        "first line: {lines:?}"
    );
    let location = format!("at s3://tusk-backups/lifecycle/{ns}/db/b1/");
    ensure!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("Backup b1: Completed, ") && l.ends_with(&location)),
        "last line is not Completed {location}: {lines:?}"
    );

    // A Backup of a cluster that does not exist is refused, not left Pending.
    let missing = kubectl_tusk(&["backup", "nosuch", "-n", &ns, "--wait"]).await?;
    ensure!(
        missing.code == Some(1)
            && missing
                .stderr
                .contains(&format!("PostgreSQL {ns}/nosuch not found")),
        "backup of a missing cluster: exit {:?}, {}",
        missing.code,
        missing.stderr
    );

    let json = ok(&["status", "db", "-n", &ns, "-o", "json"]).await?;
    let summary: serde_json::Value = serde_json::from_str(&json).context("status -o json")?;
    ensure!(
        summary["backups"][0]["name"] == "b1"
            && summary["backups"][0]["phase"] == "Completed"
            && summary["backups"][0]["sizeBytes"]
                .as_i64()
                .unwrap_or_default()
                > 0,
        "status -o json does not list b1 Completed with a size: {json}"
    );

    let after = ok(&["status", "db", "-n", &ns]).await?;
    say(format!(
        "kubectl tusk status db (after the backup):\n{after}"
    ));
    expect_lines(
        &after,
        &["  b1    Completed  ", "last successful backup: b1 ("],
    )?;

    let yaml = ok(&["restore", "b1", "--to", "copy", "-n", &ns, "--dry-run"]).await?;
    say(format!(
        "kubectl tusk restore b1 --to copy --dry-run:\n{yaml}"
    ));
    let restoring: tusk::crd::PostgreSQL =
        serde_saphyr::from_str(&yaml).context("restore --dry-run prints a PostgreSQL")?;
    ensure!(
        restoring.metadata.name.as_deref() == Some("copy")
            && restoring
                .spec
                .restore
                .as_ref()
                .and_then(|r| r.backup.as_ref())
                .is_some_and(|b| b.name == "b1")
            && restoring.spec.backup.is_some(),
        "not a copy of db restoring b1: {yaml}"
    );
    ensure!(
        ctx.postgresqls_in(&ns).get_opt("copy").await?.is_none(),
        "--dry-run created PostgreSQL copy"
    );
    Ok(())
}

/// `report` writes every object of the cluster, its Events and status, and no Secret value,
/// to a directory or a `.tar.gz`.
#[scenario]
async fn kubectl_tusk_report_has_the_objects_and_no_secret_value(ctx: Ctx) -> Result {
    ctx.require_l4()?;
    let ns = ctx.ns.clone();
    ctx.serving_lifecycle_db(5, "Retain").await?;
    let dir = std::env::temp_dir().join(format!("tusk-report-{ns}"));
    let dir_arg = dir.to_string_lossy().into_owned();
    let printed = ok(&["report", "db", "-n", &ns, "-o", &dir_arg]).await?;
    say(format!("kubectl tusk report db -o DIR:\n{printed}"));
    let read = |file: &str| {
        let path: PathBuf = dir.join(file);
        std::fs::read_to_string(&path).context(format!("reading {}", path.display()))
    };
    for (file, object) in [
        ("postgresql.yaml", "db"),
        ("statefulsets.yaml", "db"),
        ("services.yaml", "db-rw"),
        ("services.yaml", "db-hl"),
        ("configmaps.yaml", "db-config"),
        ("cronjobs.yaml", "db-backup"),
        ("pvcs.yaml", "data-db-0"),
        ("pods.yaml", "db-0"),
    ] {
        let text = read(file)?;
        ensure!(
            text.contains(&format!("name: {object}")),
            "no {object} in {file}: {text}"
        );
    }
    let secrets = read("secrets.yaml")?;
    ensure!(
        secrets.contains("name: db-app") && secrets.contains("password: \"<redacted: "),
        "Secrets missing or not redacted: {secrets}"
    );
    expect_lines(
        &read("status.txt")?,
        &[&format!("PostgreSQL {ns}/db: Ready")],
    )?;
    ensure!(dir.join("logs").is_dir(), "no instance logs directory");

    // Every credential of the namespace, raw and as stored (base64), is absent from every file.
    let mut values = Vec::new();
    for secret in Api::<Secret>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
    {
        for (key, value) in secret.data.unwrap_or_default() {
            if [
                "password",
                "uri",
                "jdbc-uri",
                "pgpass",
                "access-key",
                "secret-key",
            ]
            .contains(&key.as_str())
            {
                let raw = String::from_utf8_lossy(&value.0).into_owned();
                let stored = serde_json::to_value(&value)?
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                values.extend([raw, stored]);
            }
        }
    }
    ensure!(
        values.len() >= 6,
        "too few credentials found to check: {}",
        values.len()
    );
    let mut files = 0;
    for file in printed.lines().skip(1).map(str::trim) {
        let text = read(file)?;
        files += 1;
        for value in &values {
            ensure!(
                !text.contains(value.as_str()),
                "{file} contains a Secret value"
            );
        }
    }
    say(format!(
        "{files} files, none with any of {} credential values",
        values.len()
    ));
    std::fs::remove_dir_all(&dir).context("removing the bundle")?;

    // The archive form holds the same files under one directory.
    let archive = std::env::temp_dir().join(format!("tusk-report-{ns}.tar.gz"));
    let archive_arg = archive.to_string_lossy().into_owned();
    ok(&["report", "db", "-n", &ns, "-o", &archive_arg]).await?;
    let listing = tokio::process::Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .await
        .context("listing the archive")?;
    let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
    expect_lines(
        &listing,
        &[
            "tusk-report-db/secrets.yaml",
            "tusk-report-db/logs/db-0_postgres.log",
        ],
    )?;
    std::fs::remove_file(&archive).context("removing the archive")?;
    Ok(())
}
