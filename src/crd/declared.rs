//! `spec.roles` and `spec.databases`: roles and databases Tusk keeps as declared on the primary
//! (docs/src/cluster/roles-and-databases.md). Fields of the cluster rather than kinds of their
//! own: they are applied, restored and deleted with it, a database's owner is declared in the
//! same object as the database, and the manager that keeps them gets one document.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::LocalName;

/// A PostgreSQL identifier Tusk accepts for a declared name: lowercase, so that it needs no
/// quoting in an application's SQL.
const IDENT: &str = "^[a-z_][a-z0-9_]{0,62}$";

/// Roles no declaration may name: the superuser, PostgreSQL's own (`pg_*`, and names the
/// grammar reserves) and Tusk's machine roles (`tusk_*`).
const RESERVED_ROLE: &str = "self in ['postgres', 'public', 'none', 'current_user', 'session_user', 'current_role'] || self.startsWith('pg_') || self.startsWith('tusk_')";

/// Whether a role or database should exist.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Ensure {
    /// Made if missing and kept as declared.
    #[default]
    Present,
    /// Dropped if it exists.
    Absent,
}

impl Ensure {
    pub fn contract(self) -> tusk_contract::declared::Ensure {
        match self {
            Self::Present => tusk_contract::declared::Ensure::Present,
            Self::Absent => tusk_contract::declared::Ensure::Absent,
        }
    }
}

/// A role Tusk makes and keeps as declared: changed by hand, it is put back (and an Event says
/// what). Removed from the list, a role Tusk made loses its login and password but is not
/// dropped (it may own objects); `ensure: absent` drops it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("!has(self.passwordSecret) || self.login").message("spec.roles[].passwordSecret is for a role that logs in (login: true)"))]
pub struct DeclaredRole {
    /// The role's name: a lowercase identifier, not `postgres`, not starting with `pg_` or
    /// `tusk_`, and not the bootstrap owner (whose password is `<name>-app`'s).
    #[x_kube(validation = kube::core::Rule::new(format!("self.matches('{IDENT}') && !({RESERVED_ROLE})")).message("spec.roles[].name must be a lowercase identifier of at most 63 characters, not postgres or a reserved name, and not starting with pg_ or tusk_"))]
    #[schemars(length(max = 63))]
    pub name: String,
    /// `present` (default) or `absent`: dropped. PostgreSQL refuses to drop a role that owns
    /// objects or holds privileges; the status then says so, and Tusk retries.
    #[serde(default)]
    pub ensure: Ensure,
    /// Whether the role may log in (default true). A role that does not is a group.
    #[serde(default = "yes")]
    pub login: bool,
    /// Whether it uses the privileges of the roles it is a member of without `SET ROLE`
    /// (default true).
    #[serde(default = "yes")]
    pub inherit: bool,
    /// May create databases.
    #[serde(default)]
    pub create_db: bool,
    /// May create, alter and drop other roles.
    #[serde(default)]
    pub create_role: bool,
    /// How many connections it may open at once; -1 (default): no limit.
    #[serde(default = "unlimited")]
    #[x_kube(validation = kube::core::Rule::new("self >= -1").message("spec.roles[].connectionLimit must be -1 (no limit) or more"))]
    pub connection_limit: i32,
    /// After this time (RFC 3339, such as `2027-06-30T00:00:00Z`) its password no longer
    /// logs it in. Unset: no expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$')").message("spec.roles[].validUntil must be an RFC 3339 time such as 2027-06-30T00:00:00Z"))]
    #[schemars(length(max = 40))]
    pub valid_until: Option<String>,
    /// The roles it is a member of, exactly: a missing membership is granted, one granted by
    /// hand is revoked. PostgreSQL's predefined roles (`pg_read_all_data`, `pg_monitor`, …) may
    /// be named; the superuser and Tusk's roles may not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 63)))]
    #[x_kube(validation = kube::core::Rule::new(format!("self.all(r, r.matches('{IDENT}') && r != 'postgres' && !r.startsWith('tusk_'))")).message("spec.roles[].inRoles must name roles by lowercase identifiers, not postgres and not starting with tusk_"))]
    pub in_roles: Vec<String>,
    /// A Secret of this namespace whose key `password` is the role's password. Unset, for a
    /// role that logs in: Tusk generates one in Secret `<cluster>-role-<name>` (`_` as `-`),
    /// with `username`, `password` and a `uri`. Either way a changed password becomes the role's
    /// within seconds, without a restart, sent to the server as a SCRAM verifier. A Secret you
    /// name is read at every reconcile and at least once a minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret: Option<LocalName>,
}

/// A database Tusk makes and keeps as declared. Removed from the list, it is left as it is;
/// `ensure: absent` drops it, with its data, only with `dropData: true`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("self.ensure != 'absent' || (has(self.dropData) && self.dropData)").message("spec.databases[].ensure: absent drops the database and every row in it: set dropData: true to say so"))]
pub struct DeclaredDatabase {
    /// The database's name: a lowercase identifier, not `postgres`, `template0` or
    /// `template1`. The bootstrap database may be declared (to add extensions or schemas).
    #[x_kube(validation = kube::core::Rule::new(format!("self.matches('{IDENT}') && !(self in ['postgres', 'template0', 'template1'])")).message("spec.databases[].name must be a lowercase identifier of at most 63 characters, not postgres, template0 or template1"))]
    #[schemars(length(max = 63))]
    pub name: String,
    /// `present` (default) or `absent`: dropped (`DROP DATABASE … WITH (FORCE)`, ending its
    /// sessions), which needs `dropData: true`.
    #[serde(default)]
    pub ensure: Ensure,
    /// With `ensure: absent`: yes, drop it and its data.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop_data: bool,
    /// The role that owns it: the bootstrap owner, a declared role, or one that exists.
    #[x_kube(validation = kube::core::Rule::new(format!("self.matches('{IDENT}') && !self.startsWith('tusk_')")).message("spec.databases[].owner must be a lowercase role name, not starting with tusk_"))]
    #[schemars(length(max = 63))]
    pub owner: String,
    /// Its encoding, such as `UTF8`, when it is created (from `template0`). A database that
    /// exists keeps its own; a difference is reported in the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self.matches('^[A-Za-z0-9_]{1,32}$')").message("spec.databases[].encoding must be an encoding name such as UTF8"))]
    #[schemars(length(max = 32))]
    pub encoding: Option<String>,
    /// Its locale (collation and character classes), such as `C.UTF-8`, when it is created.
    /// The image must have it. A database that exists keeps its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self.matches('^[A-Za-z0-9_.@-]{1,64}$')").message("spec.databases[].locale must be a locale name such as C.UTF-8 or en_US.UTF-8"))]
    #[schemars(length(max = 64))]
    pub locale: Option<String>,
    /// Extensions created in it (the image must ship them), updated to `version` when one is
    /// given. Removed from the list, an extension is left installed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub extensions: Vec<DeclaredExtension>,
    /// Schemas created in it, owned as declared. Removed from the list, a schema is left.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub schemas: Vec<DeclaredSchema>,
}

/// An extension of a declared database.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeclaredExtension {
    /// The extension's name, such as `pg_trgm` or `uuid-ossp`.
    #[x_kube(validation = kube::core::Rule::new("self.matches('^[a-z_][a-z0-9_-]{0,62}$')").message("spec.databases[].extensions[].name must be an extension name: lowercase letters, digits, '_' and '-'"))]
    #[schemars(length(max = 63))]
    pub name: String,
    /// The version to create it at, or to update it to (`ALTER EXTENSION … UPDATE TO`). Unset:
    /// the default version at creation, then left as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self.matches('^[A-Za-z0-9._-]{1,32}$')").message("spec.databases[].extensions[].version must be a version such as 1.6"))]
    #[schemars(length(max = 32))]
    pub version: Option<String>,
    /// The schema its objects go in (moved there if it is elsewhere). Unset: the extension's
    /// default, at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new(format!("self.matches('{IDENT}')")).message("spec.databases[].extensions[].schema must be a lowercase identifier"))]
    #[schemars(length(max = 63))]
    pub schema: Option<String>,
}

/// A schema of a declared database.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeclaredSchema {
    /// The schema's name: a lowercase identifier, not starting with `pg_`.
    #[x_kube(validation = kube::core::Rule::new(format!("self.matches('{IDENT}') && !self.startsWith('pg_') && self != 'information_schema'")).message("spec.databases[].schemas[].name must be a lowercase identifier, not starting with pg_"))]
    #[schemars(length(max = 63))]
    pub name: String,
    /// Its owner; unset: the database's owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new(format!("self.matches('{IDENT}') && !self.startsWith('tusk_')")).message("spec.databases[].schemas[].owner must be a lowercase role name, not starting with tusk_"))]
    #[schemars(length(max = 63))]
    pub owner: Option<String>,
}

fn yes() -> bool {
    true
}

fn unlimited() -> i32 {
    -1
}
