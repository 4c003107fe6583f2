//! The `kubectl tusk` plugin as a user runs it: the built binary (`TUSK_KUBECTL_TUSK_BIN`, which
//! `e2e/local/run.sh` and `node-run.sh` build) against the scenario's cluster.

use crate::{Context, Result, fail};

/// What one run of the plugin printed.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

pub async fn kubectl_tusk(args: &[&str]) -> Result<Run> {
    let bin = std::env::var("TUSK_KUBECTL_TUSK_BIN").unwrap_or_else(|_| {
        let target = std::env::var("CARGO_TARGET_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into());
        format!("{target}/debug/kubectl-tusk")
    });
    let out = tokio::process::Command::new(&bin)
        .args(args)
        .output()
        .await
        .context(format!("running {bin} (built by e2e/local/run.sh)"))?;
    Ok(Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Runs the plugin and fails unless it exits 0; returns its stdout.
pub async fn ok(args: &[&str]) -> Result<String> {
    let run = kubectl_tusk(args).await?;
    if run.code != Some(0) {
        fail!(
            "kubectl tusk {} exited {:?}: {}{}",
            args.join(" "),
            run.code,
            run.stdout,
            run.stderr
        );
    }
    Ok(run.stdout)
}
