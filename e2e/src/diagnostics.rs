//! What a failed scenario leaves behind: the operator log, the Events of its namespaces, the
//! YAML of every Tusk object and child there (Secret data left out), the Leases, and on real
//! pods each database pod's instance-manager log (what it decided is only there).

use std::fmt::Write as _;
use std::path::PathBuf;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ListParams, LogParams};

use crate::objects::Kind;
use crate::{Context, Ctx, Result};

const LOG_LINES: usize = 200;

/// Writes `<dir>/<scenario>.txt` and returns its path.
pub async fn dump(ctx: &Ctx, scenario: &str, failure: &str) -> Result<PathBuf> {
    let dir = match &ctx.settings.artifacts {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("tusk-e2e-artifacts.{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).context(format!("creating {}", dir.display()))?;
    let mut out = format!("===== {scenario} failed: {failure}\n");
    let _ = writeln!(out, "===== operator log (last {LOG_LINES} lines)");
    match ctx.platform.operator_logs().await {
        Ok(log) => {
            let lines: Vec<&str> = log.lines().collect();
            for line in &lines[lines.len().saturating_sub(LOG_LINES)..] {
                let _ = writeln!(out, "{}", strip_ansi(line));
            }
        }
        Err(e) => {
            let _ = writeln!(out, "(no operator log: {e})");
        }
    }
    for ns in ctx.namespaces() {
        section(&mut out, &format!("Events of {ns}"), events(ctx, &ns).await);
        section(
            &mut out,
            &format!("Tusk objects and children in {ns}"),
            objects(ctx, &ns).await,
        );
        section(&mut out, &format!("Leases in {ns}"), leases(ctx, &ns).await);
        section(
            &mut out,
            &format!("instance managers' logs in {ns} (last {LOG_LINES} lines each)"),
            manager_logs(ctx, &ns).await,
        );
    }
    let path = dir.join(format!("{scenario}.txt"));
    std::fs::write(&path, out).context(format!("writing {}", path.display()))?;
    Ok(path)
}

fn section(out: &mut String, title: &str, body: Result<String>) {
    let _ = writeln!(out, "===== {title}");
    match body {
        Ok(text) => out.push_str(&text),
        Err(e) => {
            let _ = writeln!(out, "(unavailable: {e})");
        }
    }
}

async fn events(ctx: &Ctx, ns: &str) -> Result<String> {
    let mut list = Api::<Event>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    list.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
    let mut out = String::new();
    for e in list {
        let object = format!(
            "{}/{}",
            e.involved_object.kind.unwrap_or_default(),
            e.involved_object.name.unwrap_or_default()
        );
        let _ = writeln!(
            out,
            "{} {} {} {}: {}",
            e.last_timestamp
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            object,
            e.message.unwrap_or_default()
        );
    }
    Ok(out)
}

async fn leases(ctx: &Ctx, ns: &str) -> Result<String> {
    let mut out = String::new();
    for mut lease in Api::<Lease>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default())
        .await?
    {
        lease.metadata.managed_fields = None;
        out.push_str(&serde_saphyr::to_string(&lease).context("YAML")?);
        out.push_str("---\n");
    }
    Ok(out)
}

/// The `postgres` container's log of each database pod (kwok's pods have none: said once each).
async fn manager_logs(ctx: &Ctx, ns: &str) -> Result<String> {
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), ns);
    let selector = ListParams::default().labels("app.kubernetes.io/component=database");
    let mut out = String::new();
    for pod in pods.list(&selector).await? {
        let name = pod.metadata.name.unwrap_or_default();
        let params = LogParams {
            container: Some("postgres".into()),
            tail_lines: Some(LOG_LINES as i64),
            ..LogParams::default()
        };
        let _ = writeln!(out, "----- {name}");
        match pods.logs(&name, &params).await {
            Ok(log) => out.push_str(&strip_ansi(&log)),
            Err(e) => {
                let _ = writeln!(out, "(no log: {e})");
            }
        }
    }
    Ok(out)
}

async fn objects(ctx: &Ctx, ns: &str) -> Result<String> {
    let mut out = String::new();
    for pg in ctx.postgresqls_in(ns).list(&ListParams::default()).await? {
        out.push_str(&serde_saphyr::to_string(&pg).context("YAML")?);
        out.push_str("---\n");
    }
    for backup in ctx.backups_in(ns).list(&ListParams::default()).await? {
        out.push_str(&serde_saphyr::to_string(&backup).context("YAML")?);
        out.push_str("---\n");
    }
    let kinds = [
        Kind::CHILDREN.as_slice(),
        &[Kind::Job, Kind::Pod, Kind::Pvc],
    ]
    .concat();
    for kind in kinds {
        let list = ctx
            .dynamic_in(ns, kind)
            .list(&ListParams::default().labels("tusk.dev/cluster"))
            .await?;
        for mut obj in list {
            // Credentials stay out of artifacts.
            if kind == Kind::Secret
                && let Some(fields) = obj.data.as_object_mut()
            {
                fields.remove("data");
            }
            obj.metadata.managed_fields = None;
            out.push_str(&serde_saphyr::to_string(&obj).context("YAML")?);
            out.push_str("---\n");
        }
    }
    Ok(out)
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI sequences end with a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
