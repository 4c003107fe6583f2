//! Reading what the operator sent in the requests a scenario saw.

use serde_json::Value;

use super::verifier::Seen;

/// The condition `type_` of a status request's body; panics with the body when it is absent.
pub fn condition<'a>(body: &'a Value, type_: &str) -> &'a Value {
    body["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {body:#}"))
}

/// The reason of an Event request.
pub fn event_reason(seen: &Seen) -> &str {
    seen.body["reason"].as_str().unwrap_or_default()
}
