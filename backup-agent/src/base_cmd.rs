//! `base-backup` and `base-restore`: the physical pair, over [`backup_agent::pipeline`]; and
//! `restore-point`, what their verification recovers to.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use backup_agent::error::AgentError;
use backup_agent::pipeline::base_backup::{BaseBackupOptions, run_base_backup};
use backup_agent::pipeline::base_restore::{BaseRestoreOptions, run_base_restore};
use backup_agent::pipeline::restore_point;
use backup_store::catalog::Bound;
use backup_store::points;
use backup_store::wal::WalArchive;

use crate::cli::{BaseBackupArgs, BaseRestoreArgs, RestorePointArgs};
use crate::pg_args::pg_params;
use crate::store_args::open_store;

pub async fn backup(args: BaseBackupArgs, cancel: &CancellationToken) -> Result<Value, AgentError> {
    let (store, location) = open_store(&args.store).await?;
    let pg = pg_params(&args.pg)?;
    let options = BaseBackupOptions {
        location: location.clone(),
        backup_id: args.write.backup_id(),
        compression: args.write.compression,
        cluster_uid: args.write.cluster_uid(),
        writer: args.write.writer(),
        wal_wait: std::time::Duration::from_secs(args.wal_wait_seconds),
    };
    let manifest = run_base_backup(store.as_ref(), &pg, &options, cancel).await?;
    Ok(json!({
        "backupId": manifest.backup_id,
        "location": format!("{}/{}", store.location(), location.backup_prefix(&manifest.backup_id)),
        "sizeBytes": manifest.total_size_bytes(),
        "physical": manifest.physical,
        "serverVersion": manifest.server_version,
        "completedAt": manifest.completed_at,
    }))
}

pub async fn restore(args: BaseRestoreArgs) -> Result<Value, AgentError> {
    let (store, location) = open_store(&args.store).await?;
    let options = BaseRestoreOptions {
        location,
        backup_id: args.backup_id,
        pgdata: args.pgdata,
        bin_dir: args.pg_bin_dir,
        before: match (args.before, args.before_lsn) {
            (Some(time), _) => Some(Bound::CompletedBy(time)),
            (None, Some(lsn)) => Some(Bound::ConsistentBy(lsn)),
            (None, None) => None,
        },
    };
    let manifest = run_base_restore(store.as_ref(), &options).await?;
    Ok(json!({
        "backupId": manifest.backup_id,
        "pgdata": options.pgdata.display().to_string(),
        "sizeBytes": manifest.total_size_bytes(),
        "physical": manifest.physical,
    }))
}

/// `restore-point`: the point and its counts, stored under the primary's system.
pub async fn restore_point(args: RestorePointArgs) -> Result<Value, AgentError> {
    let (store, location) = open_store(&args.store).await?;
    let pg = pg_params(&args.pg)?;
    let admin = pg.connect(&pg.maintenance_db).await?;
    let row = admin
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .await
        .map_err(|e| AgentError::Database(format!("reading the system identifier: {e}")))?;
    let system: String = row.get(0);
    let system: u64 = system
        .parse()
        .map_err(|_| AgentError::Database(format!("system identifier {system:?}")))?;
    let point = restore_point::write(&pg, jiff::Timestamp::now())
        .await?
        .ok_or_else(|| {
            AgentError::Other(format!(
                "no exact restore point in {} attempts: a transaction finished every time \
                 between the counts' snapshot and the point",
                restore_point::ATTEMPTS
            ))
        })?;
    let archive = WalArchive::new(&location, system);
    points::put(store.as_ref(), &archive, &point).await?;
    let tables: usize = point.databases.values().map(Vec::len).sum();
    Ok(json!({
        "name": point.name,
        "lsn": point.lsn,
        "timeline": point.timeline,
        "key": archive.point_key(&point.name),
        "databases": point.databases.len(),
        "tables": tables,
    }))
}
