//! kubectl, only where the scenario is about what a user sees through it (`kubectl explain`)
//! or the platform has no API for it (exec into a real pod).

use crate::{Context, Result, fail};

/// The pinned kubectl of e2e/local (TUSK_KUBECTL_BIN), else the one on PATH.
pub async fn kubectl(args: &[&str]) -> Result<String> {
    let bin = std::env::var("TUSK_KUBECTL_BIN").unwrap_or_else(|_| "kubectl".into());
    let out = tokio::process::Command::new(&bin)
        .args(args)
        .output()
        .await
        .context(format!("running {bin}"))?;
    if !out.status.success() {
        fail!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
