//! The roles Tusk's own programs log in as over the network, each with only what its work needs
//! (the superuser stays on the local socket):
//!
//! - `tusk_replication` streams and clones: replication connections only.
//! - `tusk_rewind`, in database `postgres` only, answers a former primary's questions before a
//!   rewind and serves `pg_rewind` its files: the four file functions PostgreSQL documents for
//!   a non-superuser rewind, no slots, no tables.
//! - `tusk_backup` dumps: it reads every table and large object (`pg_read_all_data`, and
//!   `lo_compat_privileges` on the role, since no grant reads every large object), database
//!   sizes (`pg_read_all_stats`), past row security (a dump must see every row), and connects
//!   to every database.
//!
//! The last two take the replication role's password, and `pg_hba.conf` also asks for a
//! certificate of the cluster's CA: the replication role's credential, which reads every page
//! of the cluster anyway, used for what an ordinary session must do.
//!
//! The primary's manager keeps them: at the first start, after a restore, and once per process
//! on a primary (an operator upgrade brings them to clusters created before).

use tokio_postgres::Client;

use crate::error::Error;
use crate::sql::quote_ident;

pub use tusk_contract::roles::{
    BACKUP_OPTIONS, BACKUP_USER, REPLICATION_USER, REWIND_OPTIONS, REWIND_USER, grants,
};

/// Grants the roles what they need (the roles and their passwords are made by the caller,
/// in its silent session), then [`connect_everywhere`].
pub async fn grant(client: &Client) -> Result<(), Error> {
    for statement in grants() {
        client
            .batch_execute(&statement)
            .await
            .map_err(Error::sql(format!("granting: {statement}")))?;
    }
    connect_everywhere(client).await
}

/// CONNECT on every database `tusk_backup` (which exists) cannot connect to yet (one revoked
/// from PUBLIC, or created since): a read each time, a grant only where one is missing.
pub async fn connect_everywhere(client: &Client) -> Result<(), Error> {
    let missing = client
        .query(
            "SELECT datname::text FROM pg_database WHERE datallowconn \
             AND NOT has_database_privilege($1, oid, 'CONNECT')",
            &[&BACKUP_USER],
        )
        .await
        .map_err(Error::sql(
            "listing databases tusk_backup cannot connect to",
        ))?;
    for row in missing {
        let database: String = row.get(0);
        let sql = format!(
            "GRANT CONNECT ON DATABASE {} TO {BACKUP_USER}",
            quote_ident(&database)?
        );
        client
            .batch_execute(&sql)
            .await
            .map_err(Error::sql(format!("granting CONNECT on {database}")))?;
        tracing::info!(database, "tusk_backup may connect");
    }
    Ok(())
}
