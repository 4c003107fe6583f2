//! Accepting connections on the status port so that a flood cannot starve the kubelet's probes
//! (issue 47, defect 2). Before, a connection took one of 32 places before its TLS handshake,
//! and sockets that never spoke held them for the handshake timeout while the probes queued
//! behind them in the listen backlog: 170 silent sockets failed every probe, the primary left
//! `-rw` and the operator failed over, with no token needed. Now every connection is accepted
//! at once, on its own task; past [`MAX_CONNECTIONS`] the oldest is dropped. A probe's
//! handshake takes a millisecond, so only a flood opening that many sockets within it could
//! drop a probe, and the place a silent socket holds costs a task and a socket, no backend.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::AbortHandle;
use tokio_rustls::TlsAcceptor;

use crate::error::Error;

/// Connections open at once; past it the oldest goes.
pub const MAX_CONNECTIONS: usize = 512;
/// The accept queue the kernel keeps while a burst is being accepted.
const BACKLOG: u32 = 1024;
/// A client that has not finished its TLS handshake, or sent its request head, by then is
/// dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// No connection is kept longer (a keep-alive scraper reconnects).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// The open connections, oldest first.
#[derive(Default)]
pub struct Open {
    next: u64,
    tasks: BTreeMap<u64, AbortHandle>,
}

impl Open {
    /// Records a new connection's task; returns its number and the tasks to abort (the
    /// oldest, past `limit`).
    pub fn admit(&mut self, task: AbortHandle, limit: usize) -> (u64, Vec<AbortHandle>) {
        let id = self.next;
        self.next += 1;
        self.tasks.insert(id, task);
        let mut evicted = Vec::new();
        if self.tasks.len() > limit {
            // Finished tasks first (one that ended before it was recorded), then the oldest.
            self.tasks.retain(|_, t| !t.is_finished());
            while self.tasks.len() > limit {
                if let Some((_, oldest)) = self.tasks.pop_first() {
                    evicted.push(oldest);
                }
            }
        }
        (id, evicted)
    }

    pub fn close(&mut self, id: u64) {
        self.tasks.remove(&id);
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

/// Binds `port` on every address with a deep accept queue.
pub fn bind(port: u16) -> Result<TcpListener, Error> {
    let socket = TcpSocket::new_v4().map_err(Error::io("creating the status port's socket"))?;
    socket
        .set_reuseaddr(true)
        .map_err(Error::io("configuring the status port's socket"))?;
    socket
        .bind(([0, 0, 0, 0], port).into())
        .map_err(Error::io(format!("binding the status port {port}")))?;
    socket
        .listen(BACKLOG)
        .map_err(Error::io(format!("listening on the status port {port}")))
}

/// Accepts every connection at once, each served on its own task (TLS, then HTTP/1.1).
pub async fn accept(listener: TcpListener, acceptor: TlsAcceptor, app: axum::Router) {
    let open = Arc::new(Mutex::new(Open::default()));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, say: the next accept may succeed; do not spin.
                tracing::warn!(error = %e, "status port: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, app, registry) = (acceptor.clone(), app.clone(), open.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
        let task = tokio::spawn(async move {
            serve(stream, acceptor, app).await;
            if let Ok(id) = rx.await {
                lock(&registry).close(id);
            }
        });
        let (id, evicted) = lock(&open).admit(task.abort_handle(), MAX_CONNECTIONS);
        let _ = tx.send(id);
        if !evicted.is_empty() {
            tracing::debug!(
                count = evicted.len(),
                "status port: dropping the oldest connections"
            );
        }
        for task in evicted {
            task.abort();
        }
    }
}

async fn serve(stream: tokio::net::TcpStream, acceptor: TlsAcceptor, app: axum::Router) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "status port: TLS handshake refused");
            return;
        }
        Err(_) => return,
    };
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT)
        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app));
    let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
}

fn lock(open: &Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    open.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_limit_the_oldest_connections_go() {
        let mut open = Open::default();
        let tasks: Vec<_> = (0..5)
            .map(|_| tokio::spawn(std::future::pending::<()>()))
            .collect();
        let mut evicted = Vec::new();
        for task in &tasks {
            evicted.extend(open.admit(task.abort_handle(), 3).1);
        }
        assert_eq!(open.len(), 3);
        assert_eq!(evicted.len(), 2);
        for task in evicted {
            task.abort();
        }
        for (i, task) in tasks.into_iter().enumerate() {
            if i < 2 {
                let aborted = task.await.is_err_and(|e| e.is_cancelled());
                assert!(aborted, "task {i} went");
            } else {
                assert!(!task.is_finished(), "task {i} stays");
                task.abort();
            }
        }
    }

    #[tokio::test]
    async fn a_closed_connection_frees_its_place_and_finished_ones_go_before_live_ones() {
        let mut open = Open::default();
        let done = tokio::spawn(async {});
        let done_handle = done.abort_handle();
        done.await.unwrap();
        let live = tokio::spawn(std::future::pending::<()>());
        let (first, _) = open.admit(done_handle, 2);
        let (second, _) = open.admit(live.abort_handle(), 2);
        let newest = tokio::spawn(std::future::pending::<()>());
        let (_, evicted) = open.admit(newest.abort_handle(), 2);
        assert!(evicted.is_empty(), "the finished one went, not a live one");
        assert_eq!(open.len(), 2);
        open.close(second);
        open.close(first);
        assert_eq!(open.len(), 1);
        live.abort();
        newest.abort();
    }
}
