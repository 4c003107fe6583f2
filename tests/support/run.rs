//! Runs one reconcile against a scripted API server.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use tusk::PostgreSQL;
use tusk::error::Error;
use tusk::runtime::Context;

use super::memory_store::MemoryBucket;
use super::verifier::{self, Expect, Seen};
use super::world::{Cache, context_with};

/// Builds the context for `pg` and `cache` over the verifier's client, runs `reconcile` with it
/// and returns its output and every request seen. Missing or extra calls fail the test.
pub async fn against<F, Fut, T>(
    pg: &PostgreSQL,
    cache: Cache,
    bucket: MemoryBucket,
    script: Vec<Expect>,
    reconcile: F,
) -> (T, Vec<Seen>)
where
    F: FnOnce(Arc<Context>) -> Fut,
    Fut: Future<Output = T>,
{
    let (client, server) = verifier::client();
    let ctx = context_with(client, pg, cache, bucket);
    // On the heap, as the controller keeps it: a reconcile's future is too large for a test
    // thread's stack in debug builds.
    let reconcile = tokio::time::timeout(Duration::from_secs(10), Box::pin(reconcile(ctx)));
    let work = async { reconcile.await.expect("reconcile finished") };
    server.play_during(script, work).await
}

/// Runs one reconcile of cluster `pg` against `script`.
pub async fn reconcile_cluster(
    pg: PostgreSQL,
    cache: Cache,
    bucket: MemoryBucket,
    script: Vec<Expect>,
) -> (Result<Action, Error>, Vec<Seen>) {
    let cluster = pg.clone();
    against(&cluster, cache, bucket, script, |ctx| {
        tusk::clusters::reconcile(Arc::new(pg), ctx)
    })
    .await
}

/// Runs one reconcile of `pg` with an empty bucket; panics when it fails.
pub async fn scenario(pg: PostgreSQL, cache: Cache, script: Vec<Expect>) -> (Action, Vec<Seen>) {
    let (result, seen) = scenario_result(pg, cache, script).await;
    (result.expect("reconcile succeeded"), seen)
}

/// Like [`scenario`], for reconciles that may fail.
pub async fn scenario_result(
    pg: PostgreSQL,
    cache: Cache,
    script: Vec<Expect>,
) -> (Result<Action, Error>, Vec<Seen>) {
    reconcile_cluster(pg, cache, MemoryBucket::default(), script).await
}
