//! Secret `<name>-declared`: `spec.roles` and `spec.databases` as one document
//! (`tusk_contract::declared`) for the primary's manager, which watches it and keeps each object
//! on the server. Passwords become SCRAM-SHA-256 verifiers here; a verifier is made again only
//! when its password changed (each carries a digest of the password it was made from), so a
//! converged cluster rewrites nothing. And the Secrets Tusk generates for roles that log in
//! without naming one.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use tusk_contract::declared::{self as contract, DOCUMENT_KEY, Document};

use super::verifiers::password_digest;
use super::{Cluster, Component};
use crate::crd::{DeclaredDatabase, DeclaredRole};

/// Where a declared role's password comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordSource {
    /// A role that does not log in has none.
    None,
    /// `passwordSecret`: the user's Secret.
    Named(String),
    /// Tusk's Secret `<cluster>-role-<name>`.
    Generated(String),
}

impl PasswordSource {
    pub fn secret(&self) -> Option<&str> {
        match self {
            Self::None => None,
            Self::Named(name) | Self::Generated(name) => Some(name),
        }
    }
}

/// Secret `<cluster>-role-<name>` (`_` as `-`: role names have no `-`, so no two roles share
/// one).
pub fn role_secret_name(cluster: &Cluster, role: &str) -> String {
    format!("{}-role-{}", cluster.name, role.replace('_', "-"))
}

pub fn password_source(cluster: &Cluster, role: &DeclaredRole) -> PasswordSource {
    if !role.login || role.ensure == crate::crd::Ensure::Absent {
        return PasswordSource::None;
    }
    match &role.password_secret {
        Some(named) => PasswordSource::Named(named.name.clone()),
        None => PasswordSource::Generated(role_secret_name(cluster, &role.name)),
    }
}

/// The Secret Tusk generates for `role`: `username` and `password` only (a connection string
/// names a database and goes stale when the password is rotated; the app Secret has those).
pub fn generated_role_secret(cluster: &Cluster, role: &str, password: &str) -> Secret {
    let data = BTreeMap::from([
        ("username".to_owned(), ByteString(role.as_bytes().to_vec())),
        (
            "password".to_owned(),
            ByteString(password.as_bytes().to_vec()),
        ),
    ]);
    Secret {
        metadata: cluster.child_meta(role_secret_name(cluster, role), Component::Credentials),
        type_: Some("kubernetes.io/basic-auth".to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

/// A role's password was not found where its source says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("role {role}: Secret {secret} has no key password")]
pub struct MissingPassword {
    pub role: String,
    pub secret: String,
}

/// The document for `roles` and `databases`, with `passwords` (role name → password, for every
/// role whose source is a Secret). A verifier of `previous` is kept while its password is the
/// same.
pub fn document(
    cluster: &Cluster,
    roles: &[DeclaredRole],
    databases: &[DeclaredDatabase],
    passwords: &BTreeMap<String, String>,
    previous: Option<&Document>,
) -> Result<Document, MissingPassword> {
    let kept = |name: &str, digest: &str| {
        previous?
            .roles
            .iter()
            .find(|r| r.name == name && r.password_digest.as_deref() == Some(digest))?
            .verifier
            .clone()
    };
    let mut out = Vec::with_capacity(roles.len());
    for role in roles {
        let (verifier, digest) = match password_source(cluster, role).secret() {
            None => (None, None),
            Some(secret) => {
                let password = passwords.get(&role.name).ok_or_else(|| MissingPassword {
                    role: role.name.clone(),
                    secret: secret.to_owned(),
                })?;
                let digest = password_digest(password.as_bytes());
                let verifier = kept(&role.name, &digest).unwrap_or_else(|| {
                    postgres_protocol::password::scram_sha_256(password.as_bytes())
                });
                (Some(verifier), Some(digest))
            }
        };
        out.push(contract::Role {
            name: role.name.clone(),
            ensure: role.ensure.contract(),
            login: role.login,
            inherit: role.inherit,
            create_db: role.create_db,
            create_role: role.create_role,
            connection_limit: role.connection_limit,
            valid_until: role.valid_until.clone(),
            in_roles: role.in_roles.clone(),
            verifier,
            password_digest: digest,
        });
    }
    Ok(Document {
        roles: out,
        databases: databases.iter().map(database).collect(),
        pooler: cluster.spec.pooler.is_some(),
    })
}

fn database(database: &DeclaredDatabase) -> contract::Database {
    contract::Database {
        name: database.name.clone(),
        ensure: database.ensure.contract(),
        owner: database.owner.clone(),
        encoding: database.encoding.clone(),
        locale: database.locale.clone(),
        extensions: database
            .extensions
            .iter()
            .map(|e| contract::Extension {
                name: e.name.clone(),
                version: e.version.clone(),
                schema: e.schema.clone(),
            })
            .collect(),
        schemas: database
            .schemas
            .iter()
            .map(|s| contract::Schema {
                name: s.name.clone(),
                owner: s.owner.clone(),
            })
            .collect(),
    }
}

/// Secret `<name>-declared` holding `document`.
pub fn declared_secret(cluster: &Cluster, document: &Document) -> Secret {
    // Serializing plain data cannot fail; an empty document is still a valid one.
    let json = serde_json::to_vec(document).unwrap_or_default();
    Secret {
        metadata: cluster.child_meta(contract::secret_name(cluster.name), Component::Credentials),
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            DOCUMENT_KEY.to_owned(),
            ByteString(json),
        )])),
        ..Secret::default()
    }
}

/// The document a stored `<name>-declared` holds.
pub fn stored_document(secret: &Secret) -> Option<Document> {
    let bytes = secret.data.as_ref()?.get(DOCUMENT_KEY)?;
    serde_json::from_slice(&bytes.0).ok()
}

#[cfg(test)]
#[path = "declared_tests.rs"]
mod tests;
