//! Promotion of the local standby once its pod holds the Lease. Asked for without waiting: a
//! promotion ends only after the standby replayed what it received, which can take long (the
//! target is chosen by *received* WAL); the supervisor follows it tick by tick from what the
//! server says (`monitor`), fencing it if the Lease moves on meanwhile.

use crate::context::Context;
use crate::error::Error;
use crate::sql::connect;

/// `pg_promote(wait => false)`: asks the startup process to end recovery.
pub async fn request(ctx: &Context) -> Result<(), Error> {
    let client = connect(ctx, "postgres").await?;
    let asked: bool = client
        .query_one("SELECT pg_promote(wait => false)", &[])
        .await
        .map_err(Error::sql("pg_promote"))?
        .get(0);
    if !asked {
        return Err(Error::State(
            "pg_promote refused to signal the promotion".into(),
        ));
    }
    Ok(())
}
