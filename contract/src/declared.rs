//! Roles and databases declared in a cluster's spec, as the operator hands them to the primary's
//! manager: one JSON document in Secret `<cluster>-declared` (key [`DOCUMENT_KEY`]), which the
//! manager watches through the API (a change reaches it in about a second, not at the kubelet's
//! next refresh of a mounted file). Passwords travel as SCRAM-SHA-256 verifiers only.

use serde::{Deserialize, Serialize};

/// The key of the document in Secret `<cluster>-declared`.
pub const DOCUMENT_KEY: &str = "declared.json";

/// The comment Tusk puts on every role it made from a declaration: a role that bears it and is
/// no longer declared is disabled (no login, no password), never dropped unless declared
/// `absent`; a role without it, Tusk never touches. Removing the comment hands a role back.
pub const ROLE_MARK: &str = "tusk: declared";

/// Secret `<cluster>-declared`, which the primary's manager watches.
pub fn secret_name(cluster: &str) -> String {
    format!("{cluster}-declared")
}

/// A digest of a document as JSON (FNV-1a, 64 bits, hex): the manager reports the digest of
/// the document it last kept, so the operator can tell a report of the current declaration
/// from one of the previous. Not for security: nothing is trusted because of it.
pub fn digest(json: &[u8]) -> String {
    let hash = json.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Whether a role or database should exist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ensure {
    #[default]
    Present,
    Absent,
}

/// The whole declaration of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    #[serde(default)]
    pub roles: Vec<Role>,
    #[serde(default)]
    pub databases: Vec<Database>,
    /// `spec.pooler` is set: the primary keeps role `tusk_pooler` and its lookup function in
    /// every database. Left out when false, so documents from before it keep their digest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pooler: bool,
}

/// A role and what it should be.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    pub name: String,
    #[serde(default)]
    pub ensure: Ensure,
    pub login: bool,
    pub inherit: bool,
    pub create_db: bool,
    pub create_role: bool,
    /// -1: no limit.
    pub connection_limit: i32,
    /// RFC 3339; none: valid for ever.
    #[serde(default)]
    pub valid_until: Option<String>,
    /// Exactly the roles it is a member of.
    #[serde(default)]
    pub in_roles: Vec<String>,
    /// The password's SCRAM-SHA-256 verifier; none: the role has no password.
    #[serde(default)]
    pub verifier: Option<String>,
    /// A digest of the password the verifier was made from: the operator makes a new verifier
    /// (a new salt) only when the password changes. The manager does not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_digest: Option<String>,
}

/// A database and what it should hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Database {
    pub name: String,
    #[serde(default)]
    pub ensure: Ensure,
    pub owner: String,
    /// At creation only.
    #[serde(default)]
    pub encoding: Option<String>,
    /// At creation only.
    #[serde(default)]
    pub locale: Option<String>,
    #[serde(default)]
    pub extensions: Vec<Extension>,
    #[serde(default)]
    pub schemas: Vec<Schema>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Extension {
    pub name: String,
    /// None: the default version at creation, then left as it is.
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub schema: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schema {
    pub name: String,
    /// None: the database's owner.
    #[serde(default)]
    pub owner: Option<String>,
}

/// What the primary's manager reports of one declared object in `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectState {
    /// `role` or `database`.
    pub kind: String,
    pub name: String,
    /// `Ready`, `Absent`, `Disabled` (a role no longer declared) or `Failed`.
    pub state: String,
    /// Why it failed, from the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
