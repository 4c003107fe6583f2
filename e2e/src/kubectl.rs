//! kubectl, only where the scenario is about what a user sees through it (`kubectl explain`)
//! or the platform has no API for it (exec into a real pod).

use crate::{Context, Result, fail};

/// The pinned kubectl of e2e/local (TUSK_KUBECTL_BIN), else the one on PATH.
pub async fn kubectl(args: &[&str]) -> Result<String> {
    kubectl_with_stderr(args).await.map(|(stdout, _)| stdout)
}

/// As [`kubectl`], and fails if kubectl printed any warning (the API server's `Warning`
/// headers: an unrecognised format in a CRD, a deprecated field): installing prints none.
pub async fn kubectl_without_warnings(args: &[&str]) -> Result<String> {
    let (stdout, stderr) = kubectl_with_stderr(args).await?;
    let warnings: Vec<&str> = (stderr.lines())
        .filter(|l| l.trim_start().starts_with("Warning:"))
        .collect();
    if !warnings.is_empty() {
        fail!("kubectl {} warned: {}", args.join(" "), warnings.join("; "));
    }
    Ok(stdout)
}

async fn kubectl_with_stderr(args: &[&str]) -> Result<(String, String)> {
    let bin = std::env::var("TUSK_KUBECTL_BIN").unwrap_or_else(|_| "kubectl".into());
    let out = tokio::process::Command::new(&bin)
        .args(args)
        .output()
        .await
        .context(format!("running {bin}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        fail!("kubectl {} failed: {}", args.join(" "), stderr.trim());
    }
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), stderr))
}
