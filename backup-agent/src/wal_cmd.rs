//! `wal-push` and `wal-fetch`: PostgreSQL's archive and restore commands, over [`wal`].

use serde_json::{Value, json};

use backup_agent::error::AgentError;
use backup_store::wal::{self, Pushed, WalArchive, WalName};

use crate::cli::{WalFetchArgs, WalPushArgs};
use crate::store_args::open_store;

pub async fn push(args: WalPushArgs) -> Result<Value, AgentError> {
    let name = args
        .file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| AgentError::Usage(format!("{} names no file", args.file.display())))?;
    let file = WalName::parse(name)?;
    let system = wal::system_identifier(&args.pgdata)?;
    let size = std::fs::metadata(&args.file)
        .map_err(|e| AgentError::io(format!("reading {}", args.file.display()), e))?
        .len();
    let (store, location) = open_store(&args.store).await?;
    let archive = WalArchive::new(&location, system);
    let pushed = wal::push_file(store.as_ref(), &archive, &file, &args.file).await?;
    Ok(json!({
        "file": file.as_str(),
        "key": archive.key(&file),
        "systemIdentifier": system.to_string(),
        "alreadyArchived": pushed == Pushed::AlreadyArchived,
        "sizeBytes": size,
    }))
}

pub async fn fetch(args: WalFetchArgs) -> Result<Value, AgentError> {
    let file = WalName::parse(&args.name)?;
    let system = wal::system_identifier(&args.pgdata)?;
    let (store, location) = open_store(&args.store).await?;
    let archive = WalArchive::new(&location, system);
    let contents = wal::fetch(store.as_ref(), &archive, &file)
        .await?
        .ok_or_else(|| AgentError::NotArchived(args.name.clone()))?;
    // Written beside the destination and renamed: recovery never reads half a file.
    let partial = args.destination.with_extension("tusk-partial");
    let write = async {
        tokio::fs::write(&partial, &contents).await?;
        tokio::fs::rename(&partial, &args.destination).await
    };
    write
        .await
        .map_err(|e| AgentError::io(format!("writing {}", args.destination.display()), e))?;
    Ok(json!({
        "file": file.as_str(),
        "systemIdentifier": system.to_string(),
        "sizeBytes": contents.len(),
    }))
}
