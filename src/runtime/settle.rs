//! The outer steps both controllers take around a reconcile, so that they treat errors alike:
//! a status computed from a stale copy is retried shortly and not reported, a namespace being
//! deleted ends the reconcile quietly, and success resets the object's error backoff.

use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::debug;

use super::backoff::ErrorBackoff;
use super::status::STALE_COPY_RETRY;
use crate::error::{Error, Result};

/// How one reconcile ended.
#[derive(Debug)]
pub enum Settled {
    /// Done (or nothing left to do); the object's backoff was reset.
    Done(Action),
    /// The status was computed from a cached copy that predates a write (most often the last
    /// reconcile's own status), so it was not written: again shortly, with the newer copy.
    /// Status writes do not trigger reconciles, hence the requeue.
    Stale,
    /// Failed: the caller reports it; the error policy backs off.
    Failed(Error),
}

impl Settled {
    /// The `result` label of the reconcile metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Done(_) => "success",
            Self::Stale => "StaleCopy",
            Self::Failed(error) => error.reason(),
        }
    }

    /// What the controller is handed back.
    #[expect(
        clippy::result_large_err,
        reason = "the error every reconcile step returns; the async steps return it unboxed too"
    )]
    pub fn into_result(self) -> Result<Action> {
        match self {
            Self::Done(action) => Ok(action),
            Self::Stale => Ok(Action::requeue(STALE_COPY_RETRY)),
            Self::Failed(error) => Err(error),
        }
    }
}

/// Settles `result`, the reconcile of `object`.
pub fn settle<K>(object: &K, backoff: &ErrorBackoff<K>, result: Result<Action>) -> Settled
where
    K: Resource<DynamicType = ()>,
{
    let settled = match result {
        // The namespace and the object are going away: no Warning, no retry.
        Err(error) if error.is_namespace_terminating() => {
            debug!(kind = %K::kind(&()), name = ?object.meta().name, namespace = ?object.meta().namespace, "namespace terminating; nothing to do");
            Settled::Done(Action::await_change())
        }
        Err(error) if error.is_stale_copy() => {
            debug!(kind = %K::kind(&()), name = ?object.meta().name, namespace = ?object.meta().namespace, "status computed from a stale copy; again with the newer one");
            return Settled::Stale;
        }
        Err(error) => return Settled::Failed(error),
        Ok(action) => Settled::Done(action),
    };
    backoff.reset(&ObjectRef::from_obj(object));
    settled
}
