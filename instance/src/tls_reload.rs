//! Certificate files replaced under a running server (a renewal, a rotated CA, a Secret changed
//! by the user or cert-manager) take effect by a reload, never a restart. The kubelet swaps a
//! Secret volume's files in place; PostgreSQL reads its certificate, key and CA again on
//! SIGHUP, so the manager polls the files and reloads when their contents change. The
//! manager's own peer connections read the CA at each connection and need nothing.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use crate::context::Context;
use crate::error::Error;

/// The mounted server Secret's files: the CA (`TUSK_CA_FILE`) and the certificate and key
/// beside it.
fn watched(ctx: &Context) -> Vec<PathBuf> {
    let dir = ctx.args.tls_dir();
    vec![
        ctx.args.ca_file.clone(),
        dir.join("tls.crt"),
        dir.join("tls.key"),
    ]
}

/// A digest of the files' contents; an unreadable file counts as its own content, so a file
/// that comes back is a change too.
fn fingerprint(files: &[PathBuf]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for file in files {
        match std::fs::read(file) {
            Ok(bytes) => bytes.hash(&mut hasher),
            Err(e) => e.kind().to_string().hash(&mut hasher),
        }
    }
    hasher.finish()
}

async fn reload(ctx: &Context) -> Result<(), Error> {
    let db = crate::sql::connect(ctx, "postgres").await?;
    db.batch_execute("SELECT pg_reload_conf()")
        .await
        .map_err(Error::sql("pg_reload_conf after the TLS files changed"))
}

/// Starts the task. `running` is the postmaster's generation while one runs.
pub fn spawn(ctx: Arc<Context>, running: watch::Receiver<Option<u64>>) {
    tokio::spawn(async move {
        let files = watched(&ctx);
        let mut applied = fingerprint(&files);
        let mut tick = tokio::time::interval(ctx.args.tls_poll_interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = fingerprint(&files);
            if now == applied {
                continue;
            }
            if running.borrow().is_none() {
                // The next start reads them.
                applied = now;
                continue;
            }
            match reload(&ctx).await {
                Ok(()) => {
                    tracing::info!("TLS files changed: configuration reloaded");
                    applied = now;
                }
                // Tried again at the next tick.
                Err(e) => tracing::warn!(error = %e, "TLS files changed, reload failed"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_missing_or_returned_file_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tls.crt");
        let files = vec![file.clone()];
        let missing = fingerprint(&files);
        std::fs::write(&file, "one").unwrap();
        let one = fingerprint(&files);
        assert_ne!(missing, one);
        assert_eq!(one, fingerprint(&files));
        std::fs::write(&file, "two").unwrap();
        assert_ne!(one, fingerprint(&files));
    }
}
