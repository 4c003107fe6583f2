//! What the support bundle keeps of an object: everything but Secret values (and the
//! `last-applied-configuration` annotation, which can repeat them) and `managedFields`, which
//! is noise for whoever reads the bundle.

use serde_json::Value;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `object` (any kind, as JSON) ready for the bundle.
pub fn sanitize(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if object.get("kind").and_then(Value::as_str) == Some("Secret") {
        redact_secret(&mut object);
    }
    object
}

/// Replaces every value of `data` by its size and drops `stringData` and the annotation.
fn redact_secret(secret: &mut Value) {
    if let Some(data) = secret.get_mut("data").and_then(Value::as_object_mut) {
        for value in data.values_mut() {
            // `data` values are base64: three bytes for every four characters.
            let bytes = value
                .as_str()
                .map_or(0, |v| v.trim_end_matches('=').len() * 3 / 4);
            *value = Value::String(format!("<redacted: {bytes} bytes>"));
        }
    }
    if let Some(object) = secret.as_object_mut() {
        object.remove("stringData");
    }
    if let Some(annotations) = secret
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secret_values_are_replaced_by_their_size_everywhere() {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "shop-app", "managedFields": [{"manager": "tusk"}],
                "annotations": {
                    LAST_APPLIED: "{\"stringData\":{\"password\":\"hunter2hunter2\"}}",
                    "keep": "me"}},
            "data": {"password": "aHVudGVyMmh1bnRlcjI=", "username": "c2hvcA=="},
            "stringData": {"password": "hunter2hunter2"}
        });
        let clean = sanitize(secret);
        let text = clean.to_string();
        for leaked in [
            "hunter2hunter2",
            "aHVudGVyMmh1bnRlcjI",
            "c2hvcA",
            "managedFields",
        ] {
            assert!(!text.contains(leaked), "{leaked} in {text}");
        }
        assert_eq!(
            clean["data"],
            json!({"password": "<redacted: 14 bytes>", "username": "<redacted: 4 bytes>"})
        );
        assert_eq!(clean["metadata"]["annotations"], json!({"keep": "me"}));
    }

    #[test]
    fn other_kinds_keep_their_content() {
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "shop-config", "managedFields": []},
            "data": {"postgresql.conf": "max_connections = 200"}});
        let clean = sanitize(config);
        assert_eq!(clean["data"]["postgresql.conf"], "max_connections = 200");
        assert!(clean["metadata"].get("managedFields").is_none());
    }
}
