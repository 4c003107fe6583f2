//! The new side's steps of an online upgrade as the new instance set's primary manager serves
//! them to the operator (`tusk_contract::upgrade_target`): the copy (roles, schema,
//! subscriptions) runs in the background, since a large schema takes longer than a request
//! should; its progress is read from the subscriptions when asked; the finish is short.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tusk_contract::roles::UPGRADE_USER;
use tusk_contract::upgrade_target::{
    CopyProgress, CopyRequest, CopyState, DatabaseProgress, Finished,
};

use crate::context::Context;
use crate::error::Error;
use crate::upgrade::{Database, Server, conninfo_value, target};
use crate::upgrade_source::local;

/// The certificate and key of `tusk_upgrade`, which the operator adds to the cluster's server
/// Secret (mounted beside the CA) for the upgrade's time.
const UPGRADE_CRT: &str = "upgrade.crt";
const UPGRADE_KEY: &str = "upgrade.key";

/// The copy's state, shared by the requests and the background task, and what it was asked
/// (the way to the old primary, which [`progress`] looks at when a table's copy stalls).
#[derive(Default)]
pub struct Copy {
    state: Mutex<(CopyState, Option<String>, Vec<String>)>,
    request: Mutex<Option<CopyRequest>>,
}

impl Copy {
    fn set(&self, state: CopyState, message: Option<String>, databases: Vec<String>) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = (state, message, databases);
    }

    fn get(&self) -> (CopyState, Option<String>, Vec<String>) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The old primary as `tusk_upgrade` reaches it: verified by the cluster's CA and by name,
/// presenting the upgrade certificate (its only credential).
fn source(ctx: &Context, request: &CopyRequest) -> Result<Server, Error> {
    let dir = ctx.args.tls_dir();
    let (cert, key) = (dir.join(UPGRADE_CRT), dir.join(UPGRADE_KEY));
    if !cert.is_file() || !key.is_file() {
        return Err(Error::State(format!(
            "the upgrade certificate is not mounted ({} and {} beside the CA)",
            cert.display(),
            key.display()
        )));
    }
    let file = |p: &std::path::Path| conninfo_value(&p.display().to_string());
    Ok(Server {
        conninfo: format!(
            "host={} port={} user={UPGRADE_USER} sslmode=verify-full sslrootcert={} \
             sslcert={} sslkey={}",
            conninfo_value(&request.host),
            request.port,
            file(&ctx.args.ca_file),
            file(&cert),
            file(&key)
        ),
        bin_dir: ctx.args.pg_bin_dir.clone(),
    })
}

fn databases(request: &CopyRequest) -> Vec<Database> {
    (request.databases.iter())
        .map(|d| Database {
            name: d.name.clone(),
            oid: d.oid,
            owner: d.owner.clone(),
        })
        .collect()
}

/// Starts the copy unless one is running or done (a failed one starts again: every step is
/// idempotent).
pub fn start(ctx: &Arc<Context>, copy: &Arc<Copy>, request: CopyRequest) {
    {
        let mut state = copy.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(state.0, CopyState::Copying | CopyState::Following) {
            return;
        }
        *state = (CopyState::Copying, None, Vec::new());
    }
    *copy.request.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.clone());
    let (ctx, copy) = (ctx.clone(), copy.clone());
    tokio::spawn(async move {
        let names = request.databases.iter().map(|d| d.name.clone()).collect();
        match run(&ctx, &request).await {
            Ok(()) => copy.set(CopyState::Following, None, names),
            Err(error) => {
                tracing::warn!(%error, "the upgrade's copy failed");
                copy.set(CopyState::Failed, Some(error.to_string()), Vec::new());
            }
        }
    });
}

async fn run(ctx: &Context, request: &CopyRequest) -> Result<(), Error> {
    let (from, to, runner) = (source(ctx, request)?, local(ctx), &*ctx.reaper);
    // The roles' dump holds their password verifiers: a private directory beside the socket,
    // outside PGDATA, removed however the copy ends.
    let scratch = Scratch::new(ctx.args.socket_dir.join("tusk-upgrade"))?;
    target::copy_roles(runner, &from, &to, &scratch.0).await?;
    for db in databases(request) {
        target::copy_schema(runner, &from, &to, &db, &scratch.0).await?;
        target::subscribe(runner, &from, &from, &to, &db).await?;
    }
    Ok(())
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(dir: PathBuf) -> Result<Scratch, Error> {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(Error::io(format!("creating {}", dir.display())))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The copy's state, and each subscribed database's tables as its subscription has them. A
/// table whose synchronisation has stalled for good fails the copy, with the tables named: the
/// operator asks for it again, and the database's copy starts afresh.
pub async fn progress(ctx: &Context, copy: &Copy) -> Result<CopyProgress, Error> {
    let (state, message, names) = copy.get();
    let mut databases = Vec::with_capacity(names.len());
    for name in names {
        let (synchronized, tables) = target::progress(&*ctx.reaper, &local(ctx), &name).await?;
        databases.push(DatabaseProgress {
            name,
            tables,
            synchronized,
        });
    }
    // The old primary unreachable for the look is no stall: the copy's own workers retry, and
    // a lost old primary is the operator's to see.
    let stall = match state {
        CopyState::Following => stalled(ctx, copy, &databases)
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "could not look for a stalled table");
                None
            }),
        _ => None,
    };
    if let Some(why) = stall {
        tracing::warn!(%why, "the upgrade's copy stalled");
        copy.set(CopyState::Failed, Some(why.clone()), Vec::new());
        return Ok(CopyProgress {
            state: CopyState::Failed,
            message: Some(why),
            databases: Vec::new(),
        });
    }
    Ok(CopyProgress {
        state,
        message,
        databases,
    })
}

/// Why the copy cannot go on, if a database's table waits for a slot the old primary no longer
/// has (only a database still copying is looked at).
async fn stalled(
    ctx: &Context,
    copy: &Copy,
    databases: &[DatabaseProgress],
) -> Result<Option<String>, Error> {
    let copying = databases.iter().filter(|d| d.synchronized < d.tables);
    let request = copy
        .request
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let Some(request) = request else {
        return Ok(None);
    };
    let from = source(ctx, &request)?;
    for db in copying {
        let tables =
            crate::upgrade::stalled::stalled(&*ctx.reaper, &from, &local(ctx), &db.name).await?;
        if !tables.is_empty() {
            return Ok(Some(format!(
                "the synchronisation of {} in {} lost its slot on the old primary \
                 (the new primary stopped as it ended): the database is copied afresh",
                tables.join(", "),
                db.name
            )));
        }
    }
    Ok(None)
}

/// The cut-over's end on this side: the sequences set to the frozen old side's values, every
/// subscription detached.
pub async fn finish(ctx: &Context, request: &CopyRequest) -> Result<Finished, Error> {
    let (from, to, runner) = (source(ctx, request)?, local(ctx), &*ctx.reaper);
    let mut sequences = 0;
    for db in databases(request) {
        sequences += target::carry_sequences(runner, &from, &to, &db.name).await?;
        target::finish(runner, &to, &db.name).await?;
    }
    Ok(Finished { sequences })
}
