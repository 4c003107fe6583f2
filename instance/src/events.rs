//! Events about this pod (events.k8s.io/v1, regarding the pod): every promotion, fence,
//! demotion, clone, rewind, re-clone and in-place restart, so `kubectl events` tells a
//! member's story without its log. Posted in the background and best effort: an API server
//! that cannot be reached must never delay the supervisor (fencing is exactly that case).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

use crate::config::RunArgs;

/// Who reports the Events (`reportingController`).
const CONTROLLER: &str = "tusk.dev/instance-manager";

#[derive(Clone)]
pub struct Events {
    /// `None` without a cluster (the test stand-in for the Lease): nothing is posted.
    api: Option<Api<Event>>,
    pod: String,
    namespace: String,
    uid: String,
}

impl Events {
    pub fn new(client: Option<kube::Client>, args: &RunArgs) -> Self {
        Self {
            api: client.map(|c| Api::namespaced(c, &args.namespace)),
            pod: args.pod_name.clone(),
            namespace: args.namespace.clone(),
            uid: args.pod_uid.clone(),
        }
    }

    pub fn normal(&self, reason: &str, action: &str, note: String) {
        self.post("Normal", reason, action, note);
    }

    pub fn warning(&self, reason: &str, action: &str, note: String) {
        self.post("Warning", reason, action, note);
    }

    fn post(&self, type_: &str, reason: &str, action: &str, note: String) {
        let Some(api) = self.api.clone() else {
            return;
        };
        let event = self.event(type_, reason, action, note);
        tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::debug!(error = %e, "posting an Event");
            }
        });
    }

    fn event(&self, type_: &str, reason: &str, action: &str, note: String) -> Event {
        Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", self.pod)),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            reporting_controller: Some(CONTROLLER.to_owned()),
            reporting_instance: Some(self.pod.clone()),
            action: Some(action.to_owned()),
            reason: Some(reason.to_owned()),
            type_: Some(type_.to_owned()),
            // The API server refuses longer notes.
            note: Some(note.chars().take(1024).collect()),
            regarding: Some(ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: Some(self.pod.clone()),
                namespace: Some(self.namespace.clone()),
                uid: Some(self.uid.clone()).filter(|uid| !uid.is_empty()),
                ..ObjectReference::default()
            }),
            ..Event::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_about_the_pod_and_its_generated_name_is_valid() {
        let events = Events {
            api: None,
            pod: "demo-1".into(),
            namespace: "prod".into(),
            uid: "1234".into(),
        };
        let event = events.event("Normal", "Promoted", "Promote", "x".repeat(2000));
        // The API server refuses a generateName ending in '.' (found on the real node).
        assert_eq!(event.metadata.generate_name.as_deref(), Some("demo-1-"));
        let regarding = event.regarding.unwrap();
        assert_eq!(
            (
                regarding.kind.as_deref(),
                regarding.name.as_deref(),
                regarding.uid.as_deref()
            ),
            (Some("Pod"), Some("demo-1"), Some("1234"))
        );
        assert_eq!(event.note.map(|n| n.len()), Some(1024));
        assert_eq!(event.reporting_instance.as_deref(), Some("demo-1"));
    }
}
