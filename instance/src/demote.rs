//! The old primary's half of a switchover: checkpoint (so the shutdown checkpoint is short and
//! writes keep flowing meanwhile), fast shutdown — which makes every connected walsender send
//! the remaining WAL, shutdown checkpoint included, and wait for its standby to flush it — and
//! then the final checkpoint's location from the control file, which the operator compares with
//! the target's replay position before it promotes the target. The supervisor drives these
//! steps one tick at a time (never blocking its loop: a holder past its deadline is fenced
//! whatever the demotion is doing); this file has the steps.

use std::time::Duration;

use crate::context::Context;
use crate::error::Error;

/// How long the fast shutdown may take before the postmaster is killed; a killed postmaster is
/// not cleanly shut down, and then no final LSN is released (the operator aborts).
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the checkpoint before the shutdown may take: only an optimisation, the shutdown
/// checkpoints anyway.
pub const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(30);

/// The checkpoint before the shutdown, bounded; a failure is only logged.
pub async fn checkpoint(ctx: &Context) {
    let checkpoint = async {
        let client = crate::sql::connect(ctx, "postgres").await?;
        client
            .batch_execute("CHECKPOINT")
            .await
            .map_err(Error::sql("CHECKPOINT before the switchover"))
    };
    match tokio::time::timeout(CHECKPOINT_TIMEOUT, checkpoint).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "checkpoint before the switchover"),
        Err(_) => tracing::warn!("checkpoint before the switchover timed out"),
    }
}

/// The latest checkpoint's location, provided the control file says the server was shut down
/// cleanly: only then is that checkpoint the last WAL record.
pub async fn final_lsn(ctx: &Context) -> Result<String, Error> {
    let mut cmd = ctx.tool("pg_controldata");
    cmd.arg("-D").arg(ctx.pgdata()).env("LC_ALL", "C");
    let out = ctx.reaper.run(cmd, "pg_controldata").await?;
    let control = ControlData::parse(&out.stdout);
    match (control.state.as_deref(), control.checkpoint) {
        (Some("shut down"), Some(lsn)) => Ok(lsn),
        (state, _) => Err(Error::State(format!(
            "the control file says {:?}, not a clean shutdown: the last WAL is not known, so \
             the Lease is not released",
            state.unwrap_or("nothing")
        ))),
    }
}

/// The two lines of `pg_controldata` a switchover needs.
#[derive(Debug, Default, PartialEq)]
struct ControlData {
    state: Option<String>,
    checkpoint: Option<String>,
}

impl ControlData {
    fn parse(text: &str) -> Self {
        let mut control = Self::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = Some(value.trim().to_string());
            match key.trim() {
                "Database cluster state" => control.state = value,
                "Latest checkpoint location" => control.checkpoint = value,
                _ => {}
            }
        }
        control
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_state_and_the_latest_checkpoint() {
        let text = "pg_control version number:            1300\n\
                    Database cluster state:               shut down\n\
                    pg_control last modified:             Tue 24 Nov 2026 12:00:00 PM UTC\n\
                    Latest checkpoint location:           0/3000108\n\
                    Latest checkpoint's REDO location:    0/3000108\n";
        assert_eq!(
            ControlData::parse(text),
            ControlData {
                state: Some("shut down".into()),
                checkpoint: Some("0/3000108".into()),
            }
        );
        let crashed = "Database cluster state:               in production\n";
        assert_eq!(
            ControlData::parse(crashed).state.as_deref(),
            Some("in production")
        );
    }
}
