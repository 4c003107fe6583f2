//! Rejoin of a former primary: `pg_rewind` from the holder, then start as its standby; when
//! the rewind fails, the old directory is moved aside and the member is cloned again.

use crate::context::Context;
use crate::decide::Upstream;
use crate::error::Error;
use crate::pgdata::{clone_from, move_aside, peer_conninfo, write_passfile, write_standby_config};
use crate::sql::connect_peer;

/// How a former primary rejoined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejoined {
    Rewound,
    Recloned,
}

pub async fn rejoin(ctx: &Context, from: &str) -> Result<Rejoined, Error> {
    // Not ready is not a failed rewind: retried later, never a reason to re-clone.
    source_ready(ctx, from).await?;
    match rewind(ctx, from).await {
        Ok(()) => Ok(Rejoined::Rewound),
        Err(e) => {
            tracing::warn!(from, error = %e, "pg_rewind failed: moving PGDATA aside and cloning again");
            move_aside(ctx.pgdata())?;
            clone_from(ctx, from).await?;
            Ok(Rejoined::Recloned)
        }
    }
}

/// pg_rewind reads the source's timeline from its control file. The Lease can name the new
/// holder before it has promoted and checkpointed (promote.rs); rewinding from it then finds
/// "the same timeline", rewinds nothing, and the former primary can never follow. So the source
/// must be out of recovery with its last checkpoint on its current timeline.
async fn source_ready(ctx: &Context, from: &str) -> Result<(), Error> {
    let client = connect_peer(ctx, from).await?;
    let row = client
        .query_one(
            "SELECT pg_is_in_recovery(), \
               (SELECT timeline_id FROM pg_control_checkpoint())::int8, \
               CASE WHEN pg_is_in_recovery() THEN NULL ELSE \
                 ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END",
            &[],
        )
        .await
        .map_err(Error::sql(format!("reading {from}'s timeline")))?;
    let (in_recovery, checkpointed, current): (bool, Option<i64>, Option<i64>) =
        (row.get(0), row.get(1), row.get(2));
    if in_recovery || current.is_none() || checkpointed != current {
        return Err(Error::State(format!(
            "{from} is not yet a primary with a checkpoint on its timeline: not rewinding yet"
        )));
    }
    Ok(())
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
    write_standby_config(ctx, &Upstream::named(from))
}
