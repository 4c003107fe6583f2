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

/// The body of the server-side apply of the object named `name` (requests sent together arrive
/// in any order, so they are found by name); panics with what was seen when there is none.
pub fn applied<'a>(seen: &'a [Seen], name: &str) -> &'a Value {
    let suffix = format!("/{name}");
    seen.iter()
        .find(|s| s.method == http::Method::PATCH && s.path.ends_with(&suffix))
        .map(|s| &s.body)
        .unwrap_or_else(|| panic!("no apply of {name} in {seen:#?}"))
}
