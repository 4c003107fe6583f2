//! Smaller watch caches. A pod template deserialized into k8s-openapi's types takes ~37 KB of
//! heap (a StatefulSet ~44 KB, nine times its JSON): at a thousand clusters the StatefulSet
//! cache alone held ~43 MiB. Cached objects keep their pod template as its JSON text in a
//! cache-only annotation instead, and [`restore`] puts it back before an apply compares, so
//! "already applied?" is decided on exactly what the server holds. Nothing else reads a cached
//! template, and the annotation is never sent: applies send the desired object, not the cache.
//! Secrets, database pods, and the kinds nothing reads but an apply's comparison, are not
//! cached as objects at all (see `secret_facts`, `database_pods` and `packed`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::watch::drop_managed_fields;

/// The cache-only annotation holding the pod template's JSON.
pub const CACHED_TEMPLATE: &str = "cache.tusk.dev/pod-template";

/// Where each kind keeps its pod template (a JSON pointer).
fn template_pointer(kind: &str) -> Option<&'static str> {
    match kind {
        "StatefulSet" => Some("/spec/template"),
        "CronJob" => Some("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// A CronJob as its cache keeps it.
pub fn compact_cronjob(object: &mut CronJob) {
    drop_managed_fields(object);
    if let Some(job) = object.spec.job_template.spec.as_mut() {
        stash(&mut object.metadata, &mut job.template);
    }
}

/// Moves `template` into `meta`'s annotation as packed JSON text; leaves both as they were if
/// it cannot be serialized (it always can: it was just deserialized).
fn stash(meta: &mut ObjectMeta, template: &mut PodTemplateSpec) {
    let Ok(text) = serde_json::to_vec(template) else {
        return;
    };
    *template = PodTemplateSpec::default();
    meta.annotations
        .get_or_insert_default()
        .insert(CACHED_TEMPLATE.to_owned(), pack(&text));
}

/// Deflated and base64-encoded: a pod template's JSON (~7 KB, its keys repeated in every
/// container) packs to a quarter, ~5 MiB at a thousand clusters. Level 1: packing runs on
/// every watch event, unpacking only when an apply compares.
fn pack(json: &[u8]) -> String {
    BASE64.encode(miniz_oxide::deflate::compress_to_vec(json, 1))
}

/// The JSON that [`pack`] packed; None if `packed` is not its output.
fn unpack(packed: &str) -> Option<Value> {
    let deflated = BASE64.decode(packed).ok()?;
    let json =
        miniz_oxide::inflate::decompress_to_vec_with_limit(&deflated, UNPACKED_LIMIT).ok()?;
    serde_json::from_slice(&json).ok()
}

/// More than any object the server accepts (objects are capped at ~1.5 MB).
const UNPACKED_LIMIT: usize = 4 << 20;

/// The JSON of a cached `kind` as the server holds it: the stashed template back in its place
/// and the annotation gone. A value without the annotation (a test's cache) is left alone.
pub fn restore(kind: &str, cached: &mut Value) {
    let Some(pointer) = template_pointer(kind) else {
        return;
    };
    let Some(text) = cached
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .and_then(|a| a.remove(CACHED_TEMPLATE))
    else {
        return;
    };
    if cached
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.is_empty())
        && let Some(meta) = cached.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("annotations");
    }
    // Not unpackable (never: only `stash` writes it): left empty, the comparison then sees a
    // difference and the apply is sent, which is safe.
    let template = text.as_str().and_then(unpack);
    if let (Some(slot), Some(template)) = (cached.pointer_mut(pointer), template) {
        *slot = template;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use serde_json::json;

    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSet;

    /// The stash on a StatefulSet (the kind it was made for; StatefulSets are now packed
    /// whole, `statefulset_summary`): the tests below exercise stash and restore through it.
    fn compact_statefulset(object: &mut StatefulSet) {
        drop_managed_fields(object);
        stash(&mut object.metadata, &mut object.spec.template);
    }
    use crate::runtime::apply::contains;

    fn statefulset() -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "prod", "annotations": {"a": "1"},
                         "managedFields": [{"manager": "tusk-operator"}]},
            "spec": {
                "selector": {"matchLabels": {"app": "db"}},
                "serviceName": "db-hl",
                "template": {
                    "metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "postgres", "image": "postgres:18",
                                             "terminationMessagePath": "/dev/termination-log"}]}
                }
            },
            "status": {"replicas": 1, "readyReplicas": 1}
        }))
        .unwrap()
    }

    fn server_json(object: &StatefulSet) -> Value {
        let mut object = object.clone();
        object.metadata.managed_fields = None;
        serde_json::to_value(object).unwrap()
    }

    #[test]
    fn a_compacted_statefulset_restores_to_what_the_server_holds() {
        let live = statefulset();
        let mut cached = live.clone();
        compact_statefulset(&mut cached);
        assert_eq!(cached.spec.template, PodTemplateSpec::default());
        assert!(cached.metadata.managed_fields.is_none());
        assert_eq!(
            cached.status, live.status,
            "readiness is read from the cache"
        );

        let mut json = serde_json::to_value(&cached).unwrap();
        restore("StatefulSet", &mut json);
        assert_eq!(json, server_json(&live));
    }

    #[test]
    fn a_stashed_template_is_packed_smaller_than_its_json_and_a_damaged_one_is_a_write() {
        let mut live = statefulset();
        let containers = (0..4).map(|i| Container {
            name: format!("c{i}"),
            image: Some("postgres:18".into()),
            termination_message_path: Some("/dev/termination-log".into()),
            ..Container::default()
        });
        live.spec.template.spec = Some(PodSpec {
            containers: containers.collect(),
            ..PodSpec::default()
        });
        let json = serde_json::to_string(&live.spec.template).unwrap();
        let mut cached = live.clone();
        compact_statefulset(&mut cached);
        let packed = &cached.metadata.annotations.as_ref().unwrap()[CACHED_TEMPLATE];
        assert!(
            packed.len() * 2 < json.len(),
            "{} vs {}",
            packed.len(),
            json.len()
        );

        cached
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(CACHED_TEMPLATE.into(), "not packed".into());
        let mut damaged = serde_json::to_value(&cached).unwrap();
        restore("StatefulSet", &mut damaged);
        let mut desired = server_json(&live);
        desired.as_object_mut().unwrap().remove("status");
        assert!(!contains(&damaged, &desired), "sent again, never skipped");
    }

    #[test]
    fn template_drift_is_still_seen_after_compaction() {
        let mut desired = statefulset();
        desired.metadata.managed_fields = None;
        desired.status = None;
        let mut cached = statefulset();
        compact_statefulset(&mut cached);
        let mut actual = serde_json::to_value(&cached).unwrap();
        restore("StatefulSet", &mut actual);
        let wanted = serde_json::to_value(&desired).unwrap();
        assert!(contains(&actual, &wanted), "unchanged: no write");

        let spec = &mut desired.spec;
        spec.template.spec = Some(PodSpec {
            containers: vec![Container {
                name: "postgres".into(),
                image: Some("postgres:17".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        });
        let wanted = serde_json::to_value(&desired).unwrap();
        assert!(!contains(&actual, &wanted), "a changed image is a write");
    }

    #[test]
    fn a_cronjobs_job_template_is_stashed_and_restored() {
        let live: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "db-backup"},
            "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "backup"}]}}}}}
        }))
        .unwrap();
        let mut cached = live.clone();
        compact_cronjob(&mut cached);
        let job = cached.spec.job_template.spec.as_ref().unwrap();
        assert_eq!(job.template, PodTemplateSpec::default());
        let mut json = serde_json::to_value(&cached).unwrap();
        restore("CronJob", &mut json);
        assert_eq!(json, serde_json::to_value(&live).unwrap());
    }

    #[test]
    fn objects_cached_without_the_annotation_compare_as_they_are() {
        let mut json = server_json(&statefulset());
        let before = json.clone();
        restore("StatefulSet", &mut json);
        restore("ConfigMap", &mut json);
        assert_eq!(json, before);
    }
}
