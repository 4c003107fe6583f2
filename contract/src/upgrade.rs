//! What a primary's instance manager answers at `GET /upgrade/preflight`: whether its databases
//! can be carried to a new major through logical replication (docs/src/design/major-upgrades.md,
//! "Preflight"). Asked before an online upgrade creates anything, so that a database it cannot
//! carry is refused with the list instead of breaking half-way.

use serde::{Deserialize, Serialize};

/// The manager's path for the preflight.
pub const PREFLIGHT_PATH: &str = "/upgrade/preflight";

/// The primary's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePreflight {
    /// The server's `wal_level`: logical replication needs `logical` (a restart to change).
    pub wal_level: String,
    /// Every database that accepts connections, templates excepted, by name.
    pub databases: Vec<DatabasePreflight>,
}

/// What one database holds that logical replication cannot carry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabasePreflight {
    pub name: String,
    /// Permanent tables (and partitioned tables) with neither a primary key nor a replica
    /// identity: with a publication for all tables, PostgreSQL refuses their UPDATEs and DELETEs
    /// on the serving primary, so the copy would break the application. `schema.table`, quoted
    /// where needed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub without_replica_identity: Vec<String>,
    /// Unlogged tables: never replicated; their rows would be missing on the new major.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unlogged: Vec<String>,
    /// Large objects: never replicated.
    #[serde(default)]
    pub large_objects: i64,
}

impl UpgradePreflight {
    /// Each reason the online method refuses, one sentence each, the tables named; empty: the
    /// copy can start. A `wal_level` below `logical` is not among them: the operator changes it
    /// (a restart), the user has nothing to fix.
    pub fn refusals(&self) -> Vec<String> {
        let mut refusals = Vec::new();
        for db in &self.databases {
            let name = &db.name;
            if !db.without_replica_identity.is_empty() {
                refusals.push(format!(
                    "database {name}: no primary key or replica identity on {} (add a primary \
                     key, or ALTER TABLE … REPLICA IDENTITY FULL)",
                    db.without_replica_identity.join(", ")
                ));
            }
            if !db.unlogged.is_empty() {
                refusals.push(format!(
                    "database {name}: unlogged table(s) {} are not replicated (ALTER TABLE … SET \
                     LOGGED, or drop them)",
                    db.unlogged.join(", ")
                ));
            }
            if db.large_objects > 0 {
                refusals.push(format!(
                    "database {name}: {} large object(s) are not replicated",
                    db.large_objects
                ));
            }
        }
        refusals
    }

    /// Whether the server must be restarted with `wal_level = logical` first.
    pub fn needs_logical_wal(&self) -> bool {
        self.wal_level != "logical"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_database_is_not_refused_and_the_reasons_name_every_table() {
        let mut preflight = UpgradePreflight {
            wal_level: "logical".into(),
            databases: vec![DatabasePreflight {
                name: "app".into(),
                ..DatabasePreflight::default()
            }],
        };
        assert!(preflight.refusals().is_empty());
        assert!(!preflight.needs_logical_wal());
        preflight.databases.push(DatabasePreflight {
            name: "shop".into(),
            without_replica_identity: vec!["public.events".into(), "\"Sales\".\"Log\"".into()],
            unlogged: vec!["public.cache".into()],
            large_objects: 2,
        });
        let refusals = preflight.refusals();
        assert_eq!(refusals.len(), 3, "{refusals:?}");
        assert!(refusals[0].contains("public.events, \"Sales\".\"Log\""));
        assert!(refusals[1].contains("public.cache"));
        assert!(refusals[2].contains("2 large object(s)"));
        preflight.wal_level = "replica".into();
        assert!(preflight.needs_logical_wal());
    }

    #[test]
    fn the_wire_format_is_camel_case_and_empty_lists_are_left_out() {
        let preflight = UpgradePreflight {
            wal_level: "replica".into(),
            databases: vec![DatabasePreflight {
                name: "app".into(),
                unlogged: vec!["public.c".into()],
                ..DatabasePreflight::default()
            }],
        };
        let json = serde_json::to_value(&preflight).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"walLevel": "replica", "databases": [
                {"name": "app", "unlogged": ["public.c"], "largeObjects": 0}]})
        );
        let back: UpgradePreflight = serde_json::from_value(json).unwrap();
        assert_eq!(back, preflight);
    }
}
