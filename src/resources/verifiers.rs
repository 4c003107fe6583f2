//! Secret `<name>-verifiers`: the SCRAM-SHA-256 verifiers of the passwords in `<name>-superuser`
//! and `<name>-app`, mounted into the database pods. The primary's manager makes each role's
//! password the declared one whenever they differ, so a password changed in its Secret becomes
//! the role's without a restart, and one changed by hand in SQL is put back.
//!
//! Verifiers, not passwords: a database superuser can read any file of its pod, and a verifier
//! is what `pg_authid` already shows it; it logs no one in. Each verifier is recorded with a
//! digest of the password it was made from (an annotation: annotations are not mounted), so a
//! converged cluster compares digests and computes nothing.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use sha2::{Digest, Sha256};

use super::{Cluster, Component};

/// The roles whose passwords are declared, as keys of the Secret (files in the pod): the
/// superuser and the application owner. A role's name is not a key: the manager knows which
/// role each slot is, so no Secret can name another role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Superuser,
    App,
}

impl Slot {
    pub const ALL: [Slot; 2] = [Slot::Superuser, Slot::App];

    /// The key in the Secret and the file name in the pod.
    pub fn key(self) -> &'static str {
        match self {
            Self::Superuser => tusk_contract::roles::SUPERUSER_VERIFIER_FILE,
            Self::App => tusk_contract::roles::APP_VERIFIER_FILE,
        }
    }

    /// The annotation recording the digest of the password the verifier was made from.
    pub fn annotation(self) -> &'static str {
        match self {
            Self::Superuser => "tusk.dev/superuser-password-sha256",
            Self::App => "tusk.dev/app-password-sha256",
        }
    }

    /// The credentials Secret whose password this slot declares.
    pub fn source(self, cluster: &Cluster) -> String {
        match self {
            Self::Superuser => cluster.superuser_secret_name(),
            Self::App => cluster.app_secret_name(),
        }
    }
}

/// The first 8 bytes of the password's SHA-256, hex: enough to notice a change, kept only
/// beside the password itself (on Secrets) and in the operator's memory.
pub fn password_digest(password: &[u8]) -> String {
    hex::encode(&Sha256::digest(password)[..8])
}

/// Secret `<name>-verifiers` with a fresh verifier (a new salt) of each password given.
pub fn verifiers_secret(cluster: &Cluster, passwords: &[(Slot, &str)]) -> Secret {
    let mut data = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    for (slot, password) in passwords {
        let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
        data.insert(slot.key().to_owned(), ByteString(verifier.into_bytes()));
        annotations.insert(
            slot.annotation().to_owned(),
            password_digest(password.as_bytes()),
        );
    }
    let mut metadata = cluster.child_meta(cluster.verifiers_secret_name(), Component::Credentials);
    metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(annotations);
    Secret {
        metadata,
        data: Some(data),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    #[test]
    fn each_password_becomes_a_verifier_recorded_with_its_digest_never_the_password() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let secret = verifiers_secret(
            &cluster,
            &[(Slot::Superuser, "s3cret-super"), (Slot::App, "s3cret-app")],
        );
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-verifiers"));
        let data = secret.data.unwrap();
        for (slot, password) in [(Slot::Superuser, "s3cret-super"), (Slot::App, "s3cret-app")] {
            let verifier = String::from_utf8(data[slot.key()].0.clone()).unwrap();
            assert!(verifier.starts_with("SCRAM-SHA-256$4096:"), "{verifier}");
            assert!(!verifier.contains(password));
            let annotations = secret.metadata.annotations.as_ref().unwrap();
            assert_eq!(
                annotations[slot.annotation()],
                password_digest(password.as_bytes())
            );
        }
        assert_ne!(
            password_digest(b"s3cret-app"),
            password_digest(b"s3cret-app2")
        );
        assert_eq!(password_digest(b"x").len(), 16);
    }
}
