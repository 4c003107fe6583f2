//! Promotion of the local standby once its pod holds the Lease.

use crate::context::Context;
use crate::error::Error;
use crate::sql::connect;

/// `pg_promote(wait => true)`: returns once the server accepts writes on its new timeline.
pub async fn promote(ctx: &Context) -> Result<(), Error> {
    let client = connect(ctx, "postgres").await?;
    let promoted: bool = client
        .query_one("SELECT pg_promote(wait => true, wait_seconds => 60)", &[])
        .await
        .map_err(Error::sql("pg_promote"))?
        .get(0);
    if promoted {
        Ok(())
    } else {
        Err(Error::State("pg_promote did not finish within 60 s".into()))
    }
}
