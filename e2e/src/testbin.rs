//! The pinned upstream tools some scenarios run (helm, prometheus): the path scripts/test.sh
//! exported, else what scripts/testbin.sh builds or finds in its cache.

use std::path::{Path, PathBuf};

use crate::{Context, Result, fail};

/// The repository root: `$TUSK_REPO` (set by scripts that run a copied binary, which may
/// outlive the checkout it was built in), else the one this crate was built in.
pub fn repo() -> PathBuf {
    std::env::var_os("TUSK_REPO").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
        Into::into,
    )
}

/// The binary of `tool` (a name scripts/testbin.sh knows) from `$variable`, else from
/// `scripts/testbin.sh tool`.
pub async fn tool(tool: &str, variable: &str) -> Result<String> {
    if let Ok(bin) = std::env::var(variable) {
        return Ok(bin);
    }
    let out = tokio::process::Command::new(repo().join("scripts/testbin.sh"))
        .arg(tool)
        .output()
        .await
        .context(format!("running scripts/testbin.sh {tool}"))?;
    let exports = String::from_utf8_lossy(&out.stdout);
    let prefix = format!("export {variable}=");
    match exports.trim().strip_prefix(&prefix) {
        Some(bin) if out.status.success() => Ok(bin.to_owned()),
        _ => fail!(
            "scripts/testbin.sh {tool} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}
