//! Events about Tusk's objects. Publishing is best effort: a failure is logged, never fatal,
//! because the Event only reports what the status already records.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use tracing::warn;

/// A Normal Event.
pub fn normal(reason: &str, action: &str, note: String) -> Event {
    event(EventType::Normal, reason, action, note)
}

/// A Warning Event.
pub fn warning(reason: &str, action: &str, note: String) -> Event {
    event(EventType::Warning, reason, action, note)
}

fn event(type_: EventType, reason: &str, action: &str, note: String) -> Event {
    Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    }
}

/// `event` naming `related` as the object it concerns. Besides telling the reader which child
/// an Event is about, it keeps Events about different children from folding into one series.
pub fn about(mut event: Event, related: ObjectReference) -> Event {
    event.secondary = Some(related);
    event
}

/// Publishes `event` about `object`.
pub async fn publish<K>(recorder: &Recorder, object: &K, event: Event)
where
    K: Resource<DynamicType = ()>,
{
    if let Err(error) = recorder.publish(&event, &object.object_ref(&())).await {
        warn!(kind = %K::kind(&()), name = %object.name_any(), %error, "could not publish an Event");
    }
}
