//! What the Secret cache keeps of each Secret: the cluster that owns it, the annotations a
//! reconcile compares (the server certificate's expiry or the CA's next rotation step, the CA
//! bundle a Secret was made with), and
//! whether a server Secret holds the replication certificate. That is
//! all a converged cluster reads, so it reads nothing from the API server; the values are never
//! kept. As objects, five Secrets per cluster cost ~1.3 KB each (the metadata struct, the owner
//! reference, and a B-tree node for a map of one or two annotations); as facts, ~0.1 KB.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use super::summaries::{Summary, SummaryStore};
use super::watch::owning_cluster;
use crate::crd::PostgreSQL;
use crate::resources::ca_rotation::CA_NEXT_STEP_ANNOTATION;
use crate::resources::tls::{
    self, CA_FINGERPRINT_ANNOTATION, NOT_AFTER_ANNOTATION, REPLICATION_CRT,
};
use crate::resources::upgrade_tls::{self, UPGRADE_CRT};
use crate::resources::verifiers::{Slot, password_digest};

/// The facts kept of one Secret.
#[derive(PartialEq)]
pub struct SecretFacts {
    /// The PostgreSQL that owns it, if one does.
    owner: Option<Box<str>>,
    /// [`NOT_AFTER_ANNOTATION`] (a server Secret) or [`CA_NEXT_STEP_ANNOTATION`] (the CA
    /// Secret, when `ca_step`), as written: one field, no Secret has both.
    when: Option<Box<str>>,
    ca_step: bool,
    /// [`CA_FINGERPRINT_ANNOTATION`], as written.
    ca_sha256: Option<Box<str>>,
    /// Whether it holds [`REPLICATION_CRT`] (a server Secret issued before it did not).
    replication_certificate: bool,
    /// Whether it holds the upgrade role's certificate (a server Secret during an upgrade).
    upgrade_certificate: bool,
    /// A credentials Secret's: the digest of its `password` ([`password_digest`]), so a
    /// changed password is noticed without reading the Secret (never the password itself).
    password_sha256: Option<Box<str>>,
    /// The verifiers Secret's: the digest each [`Slot`]'s verifier was made from.
    declared: [Option<Box<str>>; 2],
}

impl Summary<Secret> for SecretFacts {
    fn of(secret: &Secret) -> Option<Self> {
        let annotation = |key: &str| -> Option<Box<str>> {
            Some(
                secret
                    .metadata
                    .annotations
                    .as_ref()?
                    .get(key)?
                    .as_str()
                    .into(),
            )
        };
        Some(Self {
            owner: owning_cluster(secret).map(|cluster| cluster.name.into()),
            when: annotation(NOT_AFTER_ANNOTATION).or_else(|| annotation(CA_NEXT_STEP_ANNOTATION)),
            ca_step: annotation(NOT_AFTER_ANNOTATION).is_none()
                && annotation(CA_NEXT_STEP_ANNOTATION).is_some(),
            ca_sha256: annotation(CA_FINGERPRINT_ANNOTATION),
            replication_certificate: tls::carries_replication_certificate(secret),
            upgrade_certificate: upgrade_tls::carries_upgrade_certificate(secret),
            password_sha256: (secret.data.as_ref())
                .and_then(|data| data.get("password"))
                .map(|password| password_digest(&password.0).into()),
            declared: Slot::ALL.map(|slot| annotation(slot.annotation())),
        })
    }
}

impl SecretFacts {
    /// The Secret as far as the facts go: name, owner, the kept annotations, and the data keys
    /// a reconcile looks for, each with an empty value: no value is ever kept.
    fn secret(&self, namespace: &str, name: &str) -> Secret {
        let when = match self.ca_step {
            true => CA_NEXT_STEP_ANNOTATION,
            false => NOT_AFTER_ANNOTATION,
        };
        let annotations: BTreeMap<String, String> = [
            (when, &self.when),
            (CA_FINGERPRINT_ANNOTATION, &self.ca_sha256),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_owned(), value.as_deref()?.to_owned())))
        .collect();
        let owner = self.owner.as_deref().map(|cluster| OwnerReference {
            api_version: PostgreSQL::api_version(&()).into_owned(),
            kind: PostgreSQL::kind(&()).into_owned(),
            name: cluster.to_owned(),
            ..OwnerReference::default()
        });
        Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                annotations: (!annotations.is_empty()).then_some(annotations),
                owner_references: owner.map(|owner| vec![owner]),
                ..ObjectMeta::default()
            },
            data: {
                let keys = [
                    (self.replication_certificate, REPLICATION_CRT),
                    (self.upgrade_certificate, UPGRADE_CRT),
                ];
                let data: BTreeMap<String, ByteString> = (keys.into_iter())
                    .filter(|(held, _)| *held)
                    .map(|(_, key)| (key.to_owned(), ByteString(Vec::new())))
                    .collect();
                (!data.is_empty()).then_some(data)
            },
            ..Secret::default()
        }
    }
}

/// The Secrets the operator manages, as facts.
pub type SecretStore = SummaryStore<Secret, SecretFacts>;

impl SecretStore {
    /// `name` in `namespace` as far as the cache knows it (see [`SecretFacts`]), if the watch
    /// has seen it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.with(namespace, name, |facts| facts.secret(namespace, name))
    }

    /// The digest of credentials Secret `name`'s password: `None` when the cache has not seen
    /// the Secret, `Some(None)` when it holds no password.
    pub fn password_digest(&self, namespace: &str, name: &str) -> Option<Option<String>> {
        self.with(namespace, name, |facts| {
            facts.password_sha256.as_deref().map(str::to_owned)
        })
    }

    /// The password digest verifiers Secret `name` records for `slot`, if the cache has seen it.
    pub fn declared_digest(&self, namespace: &str, name: &str, slot: Slot) -> Option<String> {
        let index = Slot::ALL.iter().position(|s| *s == slot)?;
        self.with(namespace, name, |facts| {
            facts.declared[index].as_deref().map(str::to_owned)
        })
        .flatten()
    }

    /// Every Secret recording a certificate's expiry (the server certificates), as
    /// [`Self::get`] gives each: what the metrics read at each scrape.
    pub fn certificates(&self) -> Vec<Secret> {
        let certificate = |namespace: &str, name: &str, facts: &SecretFacts| {
            (facts.when.is_some() && !facts.ca_step).then(|| facts.secret(namespace, name))
        };
        self.map_all(certificate).into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::tls::{recorded_ca, recorded_not_after};

    fn server_secret() -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "db-server-tls", "namespace": "prod", "uid": "u1",
                         "labels": {"tusk.dev/cluster": "db", "app.kubernetes.io/name": "x"},
                         "annotations": {"tusk.dev/not-after": "2028-01-01T00:00:00Z",
                                         "tusk.dev/ca-sha256": "00112233aabbccdd",
                                         "other": "y"},
                         "ownerReferences": [{"apiVersion": "tusk.dev/v1alpha1",
                             "kind": "PostgreSQL", "name": "db", "uid": "c0ffee"}]},
            "type": "kubernetes.io/tls",
            "data": {"tls.key": "c2VjcmV0", "replication.crt": "Y2VydA=="}
        }))
        .unwrap()
    }

    #[test]
    fn a_cached_secret_keeps_no_values_and_only_what_is_read() {
        let stored = server_secret();
        let store = SecretStore::of([stored.clone()]);
        let cached = store.get("prod", "db-server-tls").unwrap();
        let data = cached.data.as_ref().unwrap();
        assert_eq!(data.len(), 1, "only the key renewal looks for");
        assert!(data[REPLICATION_CRT].0.is_empty(), "and never its value");
        assert!(tls::carries_replication_certificate(&cached));
        assert_eq!(cached.type_, None);
        assert_eq!(cached.metadata.uid, None);
        assert_eq!(cached.metadata.labels, None);
        assert_eq!(cached.metadata.annotations.as_ref().unwrap().len(), 2);
        assert_eq!(
            recorded_not_after(&cached),
            recorded_not_after(&stored),
            "renewal and the metrics read the expiry"
        );
        assert_eq!(recorded_ca(&cached), Some("00112233aabbccdd"));
        assert_eq!(
            owning_cluster(&cached),
            owning_cluster(&stored),
            "the metrics name the cluster, the credentials check ownership"
        );
        assert!(store.get("prod", "db-app").is_none());
        assert_eq!(store.certificates().len(), 1);
    }

    #[test]
    fn a_cached_server_secret_says_whether_it_carries_the_upgrade_certificate() {
        let mut stored = server_secret();
        let store = SecretStore::of([stored.clone()]);
        let cached = store.get("prod", "db-server-tls").unwrap();
        assert!(!upgrade_tls::carries_upgrade_certificate(&cached));
        let data = stored.data.as_mut().unwrap();
        data.insert(UPGRADE_CRT.into(), ByteString(b"cert".to_vec()));
        let store = SecretStore::of([stored]);
        let cached = store.get("prod", "db-server-tls").unwrap();
        assert!(upgrade_tls::carries_upgrade_certificate(&cached));
        assert!(tls::carries_replication_certificate(&cached));
        assert!(
            cached.data.unwrap()[UPGRADE_CRT].0.is_empty(),
            "never its value"
        );
    }

    #[test]
    fn a_cached_ca_secret_keeps_its_next_rotation_step_and_is_no_server_certificate() {
        let mut stored = server_secret();
        stored.metadata.name = Some("db-ca".into());
        let annotations = stored.metadata.annotations.as_mut().unwrap();
        annotations.remove(NOT_AFTER_ANNOTATION);
        annotations.insert(
            CA_NEXT_STEP_ANNOTATION.into(),
            "2031-01-01T00:00:00Z".into(),
        );
        let store = SecretStore::of([stored.clone()]);
        let cached = store.get("prod", "db-ca").unwrap();
        let next_step = crate::resources::ca_rotation::recorded_next_step;
        assert_eq!(next_step(&cached), next_step(&stored));
        assert!(next_step(&cached).is_some());
        assert_eq!(recorded_not_after(&cached), None);
        assert_eq!(recorded_ca(&cached), Some("00112233aabbccdd"));
        assert!(store.certificates().is_empty(), "not in the expiry metric");
    }

    #[test]
    fn a_secret_nobody_owns_is_kept_without_owner_or_annotations() {
        let mut stored = server_secret();
        stored.metadata.owner_references = None;
        stored.metadata.annotations = None;
        stored.data = None;
        let store = SecretStore::of([stored]);
        let cached = store.get("prod", "db-server-tls").unwrap();
        assert_eq!(cached.metadata.owner_references, None);
        assert_eq!(cached.metadata.annotations, None);
        assert_eq!(cached.data, None);
        assert!(store.certificates().is_empty(), "no expiry recorded");
    }

    #[test]
    fn a_password_is_kept_as_its_digest_and_a_verifier_as_the_digest_it_records() {
        let app: Secret = serde_json::from_value(json!({
            "metadata": {"name": "db-app", "namespace": "prod"},
            "data": {"password": "c2VjcmV0"}
        }))
        .unwrap();
        let verifiers: Secret = serde_json::from_value(json!({
            "metadata": {"name": "db-verifiers", "namespace": "prod",
                         "annotations": {"tusk.dev/app-password-sha256": "abc"}},
            "data": {"app": "U0NSQU0="}
        }))
        .unwrap();
        let store = SecretStore::of([app, verifiers]);
        assert_eq!(
            store.password_digest("prod", "db-app"),
            Some(Some(password_digest(b"secret")))
        );
        assert_eq!(store.password_digest("prod", "db-verifiers"), Some(None));
        assert_eq!(store.password_digest("prod", "db-other"), None);
        assert_eq!(
            store
                .declared_digest("prod", "db-verifiers", Slot::App)
                .as_deref(),
            Some("abc")
        );
        assert_eq!(
            store.declared_digest("prod", "db-verifiers", Slot::Superuser),
            None
        );
        let cached = store.get("prod", "db-app").unwrap();
        assert_eq!(cached.data, None, "no value, not even the password's key");
    }
}
