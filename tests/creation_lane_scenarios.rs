//! Mock-API scenarios of the creation lane: the main queue hands a cluster still to be created
//! over without a single API call, keeps a converged one, and the lane lets a cluster go once
//! its StatefulSet exists. What the lane's reconcile of a new cluster calls is the reconcile's
//! own (`reconcile_scenarios`); every end-to-end scenario creates its clusters through it.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use support::memory_store::MemoryBucket;
use support::verifier::{self, Expect, Seen};
use support::world::*;
use tusk::PostgreSQL;
use tusk::clusters::creation_lane;
use tusk::clusters::reconcile::reconcile_new;
use tusk::clusters::status::BackupSchedule;
use tusk::error::Error;
use tusk::runtime::Context;
use tusk::runtime::watch::Trigger;

/// Runs `reconcile` on `pg` with a creation lane, against `script`: its output, the requests
/// seen and the lane's queue.
async fn with_lane<Fut>(
    pg: PostgreSQL,
    cache: Cache,
    script: Vec<Expect>,
    reconcile: fn(Arc<PostgreSQL>, Arc<Context>) -> Fut,
) -> (Result<Action, Error>, Vec<Seen>, UnboundedReceiver<Trigger>)
where
    Fut: Future<Output = Result<Action, Error>>,
{
    let (client, server) = verifier::client();
    let (lane, queued) = futures::channel::mpsc::unbounded();
    let ctx = plain_context(client, &pg, cache, MemoryBucket::default()).with_creation_lane(lane);
    let work = tokio::time::timeout(
        Duration::from_secs(10),
        Box::pin(reconcile(Arc::new(pg), Arc::new(ctx))),
    );
    let (result, seen) = server
        .play_during(script, async { work.await.expect("reconcile finished") })
        .await;
    (result, seen, queued)
}

#[tokio::test]
async fn the_main_queue_hands_a_new_cluster_to_the_lane_without_a_call() {
    let pg = postgresql(WITH_BACKUP);
    // No script: any request fails the test.
    let (result, seen, mut queued) =
        with_lane(pg, Cache::default(), vec![], tusk::clusters::reconcile).await;
    assert_eq!(result.expect("handed over"), Action::await_change());
    assert!(seen.is_empty());
    assert_eq!(
        queued.next().await,
        Some(ObjectRef::new("demo").within("prod"))
    );
}

#[tokio::test]
async fn a_converged_cluster_stays_on_the_main_queue_and_the_lane_lets_it_go() {
    let (pg, cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    let (result, seen, mut queued) =
        with_lane(pg.clone(), cache, vec![], tusk::clusters::reconcile).await;
    assert_eq!(
        result.expect("reconciled"),
        Action::requeue(Duration::from_secs(600)),
        "reconciled here, writing nothing"
    );
    assert!(seen.is_empty());
    assert!(
        queued.try_recv().is_err(),
        "nothing handed over to the lane"
    );

    let (pg, cache) = converged(WITH_BACKUP, true, BackupSchedule::Scheduled);
    let (result, seen, _) = with_lane(pg, cache, vec![], reconcile_new).await;
    assert_eq!(result.expect("let go"), Action::await_change());
    assert!(seen.is_empty());
}

#[tokio::test]
async fn a_cluster_being_deleted_stays_on_the_main_queue() {
    let mut pg = with_finalizer(postgresql(WITH_BACKUP));
    pg.metadata.deletion_timestamp = Some(at(0));
    let (_, _, mut queued) = with_lane(pg, Cache::default(), vec![], |pg, ctx| async move {
        Ok::<_, Error>(match creation_lane::hand_over(&pg, &ctx) {
            true => Action::await_change(),
            false => Action::requeue(Duration::from_secs(1)),
        })
    })
    .await;
    assert!(
        queued.try_recv().is_err(),
        "its finalizer is the main queue's"
    );
}
