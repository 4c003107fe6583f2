//! Rejoin of a former primary: `pg_rewind` from the holder, then start as its standby; when
//! the rewind fails, the old directory is moved aside and the member is cloned again.

use crate::context::Context;
use crate::error::Error;
use crate::pgdata::{clone_from, move_aside, peer_conninfo, write_passfile, write_standby_config};

pub async fn rejoin(ctx: &Context, from: &str) -> Result<(), Error> {
    match rewind(ctx, from).await {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::warn!(from, error = %e, "pg_rewind failed: moving PGDATA aside and cloning again");
            move_aside(ctx.pgdata())?;
            clone_from(ctx, from).await
        }
    }
}

async fn rewind(ctx: &Context, from: &str) -> Result<(), Error> {
    write_passfile(ctx)?;
    let source = peer_conninfo(ctx, from, &[("user", "postgres"), ("dbname", "postgres")]);
    tracing::info!(from, "rewinding with pg_rewind");
    let mut cmd = ctx.tool("pg_rewind");
    // After a fence (immediate stop) pg_rewind first runs crash recovery in single-user mode.
    cmd.arg("--target-pgdata")
        .arg(ctx.pgdata())
        .arg(format!("--source-server={source}"));
    let out = ctx.reaper.run(cmd, "pg_rewind").await?;
    tracing::info!(output = out.stderr.trim(), "pg_rewind done");
    write_standby_config(ctx, from)
}
