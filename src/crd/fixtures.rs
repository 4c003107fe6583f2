//! Tusk objects written by hand, as the API server would hand them over: spec and status as
//! JSON, which reads like the YAML users write. For tests (this crate's and the plugin's, through
//! the `fixtures` feature); a value that does not fit the API panics with the serde error.

use serde_json::{Value, json};

use super::{Backup, PostgreSQL};

/// PostgreSQL `namespace/name` with `spec` and `status` (`Value::Null` for none).
pub fn postgresql(namespace: &str, name: &str, spec: Value, status: Value) -> PostgreSQL {
    object("PostgreSQL", namespace, name, spec, status)
}

/// Backup `namespace/name` of cluster `cluster`, with `status` (`Value::Null` for none).
pub fn backup(namespace: &str, name: &str, cluster: &str, status: Value) -> Backup {
    let spec = json!({"cluster": {"name": cluster}});
    object("Backup", namespace, name, spec, status)
}

fn object<K: serde::de::DeserializeOwned>(
    kind: &str,
    namespace: &str,
    name: &str,
    spec: Value,
    status: Value,
) -> K {
    serde_json::from_value(json!({
        "apiVersion": "tusk.dev/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec, "status": status,
    }))
    .unwrap_or_else(|e| panic!("{kind} {namespace}/{name} does not fit the API: {e}"))
}
