//! The status a reconcile wrote, until the watch brings it back. A cluster's next reconcile
//! often starts within milliseconds of the last one's status write (the echoes of that
//! reconcile's own child writes queue it), before the watch has delivered the write: computed
//! from the older copy, its status write is refused as stale (409) and it runs again, and a new
//! cluster's Lease, not yet recorded in that copy, is created a second time (409, then a read).
//! At 1,000 clusters applied at once that was one status write in five.
//!
//! No resourceVersion is compared for order (they are opaque): the written status replaces the
//! cached one only while the cache still holds exactly the version the write was made onto. A
//! status write carries that version as a precondition, so nothing came between the two: the
//! cached copy with the written status and version is the object as it is now.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::crd::{PostgreSQL, PostgreSQLStatus};

/// A status write not yet seen by the watch: the version it was made onto, and the version
/// and status it made.
struct Written {
    onto: String,
    version: Option<String>,
    status: Option<PostgreSQLStatus>,
}

/// The clusters' status writes the watch has not brought back yet, each kept until the cache
/// has moved past the version it was written onto (see [`Self::observe`]).
#[derive(Default)]
pub struct OwnStatus {
    written: Mutex<HashMap<ObjectRef<PostgreSQL>, Written>>,
}

impl OwnStatus {
    /// Records that a status write onto `onto` returned `written`.
    pub fn wrote(&self, onto: &PostgreSQL, written: PostgreSQL) {
        let Some(version) = onto.metadata.resource_version.clone() else {
            return;
        };
        let entry = Written {
            onto: version,
            version: written.metadata.resource_version,
            status: written.status,
        };
        self.lock().insert(ObjectRef::from_obj(onto), entry);
    }

    /// `cached` as it is now: with the written status while the cache still holds the version
    /// it was written onto.
    pub fn freshest(&self, cached: Arc<PostgreSQL>) -> Arc<PostgreSQL> {
        let key = ObjectRef::from_obj(cached.as_ref());
        let mut written = self.lock();
        match written.get(&key) {
            Some(entry) if cached.metadata.resource_version.as_ref() == Some(&entry.onto) => {
                let mut now = cached.as_ref().clone();
                now.metadata.resource_version = entry.version.clone();
                now.status = entry.status.clone();
                Arc::new(now)
            }
            Some(_) => {
                written.remove(&key);
                cached
            }
            None => cached,
        }
    }

    /// Forgets the writes the cache has moved past, as the clusters' watch delivers `event`
    /// (after its reflector applied it): a cluster at another version than the one written
    /// onto, or deleted.
    pub fn observe<E>(&self, event: &Result<watcher::Event<PostgreSQL>, E>) {
        let (object, deleted) = match event {
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                (object, false)
            }
            Ok(watcher::Event::Delete(object)) => (object, true),
            // A relist: it brings back every cluster there is, at its version now, but says
            // nothing of one deleted meanwhile; starting over keeps no write of it. A
            // reconcile before the list ends may be refused as stale, as before.
            Ok(watcher::Event::Init) => return self.lock().clear(),
            _ => return,
        };
        let key = ObjectRef::from_obj(object);
        let mut written = self.lock();
        let moved = |entry: &Written| {
            deleted || object.metadata.resource_version.as_ref() != Some(&entry.onto)
        };
        if written.get(&key).is_some_and(moved) {
            written.remove(&key);
        }
    }

    /// How many writes the watch has not brought back yet.
    pub fn in_flight(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectRef<PostgreSQL>, Written>> {
        // A panic while holding the lock leaves a map that is still whole.
        self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crd::fixtures::postgresql;

    fn at(version: &str, primary: &str) -> PostgreSQL {
        let spec = json!({"storage": {"size": "1Gi"}});
        let mut pg = postgresql("prod", "demo", spec, json!({"currentPrimary": primary}));
        pg.metadata.resource_version = Some(version.into());
        pg
    }

    fn primary(pg: &PostgreSQL) -> &str {
        let status = pg.status.as_ref().expect("status");
        status.current_primary.as_deref().expect("primary")
    }

    #[test]
    fn the_written_status_stands_in_only_while_the_cache_holds_the_version_it_was_written_onto() {
        let own = OwnStatus::default();
        own.wrote(&at("10", "demo-0"), at("11", "demo-1"));
        let reconciled = own.freshest(Arc::new(at("10", "demo-0")));
        assert_eq!(primary(&reconciled), "demo-1", "the cache trails the write");
        assert_eq!(reconciled.metadata.resource_version.as_deref(), Some("11"));
        assert_eq!(own.in_flight(), 1);
        let later = own.freshest(Arc::new(at("12", "demo-2")));
        assert_eq!(primary(&later), "demo-2", "changed after the write");
        assert_eq!(own.in_flight(), 0, "the cache moved past the write");
        let again = own.freshest(Arc::new(at("10", "demo-0")));
        assert_eq!(primary(&again), "demo-0", "nothing recorded any more");
    }

    #[test]
    fn the_watch_bringing_the_write_back_a_deletion_or_a_relist_forgets_it() {
        let own = OwnStatus::default();
        own.wrote(&at("10", "demo-0"), at("11", "demo-1"));
        own.observe::<()>(&Ok(watcher::Event::Apply(at("10", "demo-0"))));
        assert_eq!(own.in_flight(), 1, "an event of the version written onto");
        own.observe::<()>(&Ok(watcher::Event::Apply(at("11", "demo-1"))));
        assert_eq!(own.in_flight(), 0);
        own.wrote(&at("11", "demo-1"), at("12", "demo-2"));
        own.observe::<()>(&Ok(watcher::Event::Delete(at("11", "demo-1"))));
        assert_eq!(own.in_flight(), 0, "deleted");
        own.wrote(&at("12", "demo-2"), at("13", "demo-3"));
        own.observe::<()>(&Ok(watcher::Event::Init));
        assert_eq!(own.in_flight(), 0, "a relist starts over");
    }
}
