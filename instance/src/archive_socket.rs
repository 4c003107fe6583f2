//! The archiver's Unix socket, bound before PostgreSQL starts so that no request is lost.
//! PostgreSQL's `archive_command` (`tusk-instance wal-push %p`, [`crate::wal_push`]) sends one
//! line, `push <absolute path>`, and is answered once the file is in the bucket.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use backup_store::settings::StoreFlags;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::archiver::{Archived, Archiver, IN_FLIGHT};
use crate::disk_policy::DiskPolicy;
use crate::error::Error;
use crate::events::Events;

/// The socket's name in the socket directory (`TUSK_SOCKET_DIR`, which the hook inherits).
pub const SOCKET: &str = ".tusk-archive.sock";
/// The longest request line the server reads: a path.
const MAX_REQUEST: u64 = 4096;

pub fn socket_path(socket_dir: &Path) -> PathBuf {
    socket_dir.join(SOCKET)
}

/// Starts the archiver when the pod names a bucket (`TUSK_STORE`, set by the operator while
/// the cluster archives): the socket is bound before PostgreSQL starts, so no request is lost.
pub fn spawn(
    pgdata: &Path,
    socket_dir: &Path,
    namespace: &str,
    cluster: &str,
    events: Events,
) -> Result<Option<Arc<Archiver>>, Error> {
    let Some(flags) = StoreFlags::from_env().map_err(|e| Error::Config(e.to_string()))? else {
        return Ok(None);
    };
    let socket = socket_path(socket_dir);
    // A socket left by the previous manager of this pod: nothing listens on it any more.
    let _ = std::fs::remove_file(&socket);
    let listener =
        UnixListener::bind(&socket).map_err(Error::io(format!("binding {}", socket.display())))?;
    let policy = DiskPolicy::from_env().map_err(Error::Config)?;
    let archiver = Archiver::new(
        pgdata.to_owned(),
        flags,
        namespace.to_owned(),
        cluster.to_owned(),
        policy,
    );
    let parallel = std::env::var("TUSK_ARCHIVE_PARALLEL").ok();
    let in_flight = parallel.and_then(|n| n.parse::<usize>().ok());
    let archiver = Arc::new(archiver.serving(events, in_flight.unwrap_or(IN_FLIGHT)));
    tokio::spawn(serve(listener, archiver.clone()));
    tracing::info!(socket = %socket.display(), "archiving WAL");
    Ok(Some(archiver))
}

pub(crate) async fn serve(listener: UnixListener, archiver: Arc<Archiver>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(answer(stream, archiver.clone()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "archive socket: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// One request, `push <absolute path>`, answered `ok <outcome>` ([`Archived`]) or `error <why>`.
async fn answer(stream: UnixStream, archiver: Arc<Archiver>) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let read = BufReader::new(read.take(MAX_REQUEST))
        .read_line(&mut line)
        .await;
    let reply = match (read, line.trim_end().strip_prefix("push ")) {
        (Ok(_), Some(path)) => match archiver.archive(path).await {
            Ok(Archived::Stored) => "ok stored".to_owned(),
            Ok(Archived::AlreadyArchived) => "ok already-archived".to_owned(),
            Ok(Archived::GaveWay) => "ok gave-way".to_owned(),
            Ok(Archived::ByPrimary) => "ok archived-by-the-primary".to_owned(),
            Ok(Archived::NotArchivable) => "ok not-archivable".to_owned(),
            Ok(Archived::Released) => "ok released".to_owned(),
            Err(e) => format!("error {}", e.replace('\n', " ")),
        },
        (Err(e), _) => format!("error reading the request: {e}"),
        (Ok(_), None) => "error the request is not `push <path>`".to_owned(),
    };
    let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
}
