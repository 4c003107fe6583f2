//! The ConfigMap: postgresql.conf (Tusk's settings, then `spec.parameters`), pg_hba.conf, and the
//! script that creates the application role and database on first start.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

use super::{Cluster, Component, POSTGRES_PORT};

/// Where the ConfigMap's configuration files are mounted in the PostgreSQL container.
pub const CONFIG_DIR: &str = "/etc/tusk";
/// ConfigMap key of the first-start script, run by the image's `docker-entrypoint-initdb.d` hook
/// as the superuser over the local socket. psql variables quote the names and password, so no
/// value is ever interpolated into SQL by the shell.
pub const INITDB_SCRIPT_KEY: &str = "10-tusk-app.sh";
pub const INITDB_SCRIPT: &str = r#"#!/bin/bash
# Created by Tusk: the application role and database from spec.bootstrap.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres \
  --set=owner="$TUSK_APP_USER" --set=password="$TUSK_APP_PASSWORD" --set=db="$TUSK_APP_DATABASE" <<'SQL'
CREATE ROLE :"owner" LOGIN PASSWORD :'password';
CREATE DATABASE :"db" OWNER :"owner";
SQL
"#;

/// postgresql.conf: the settings Tusk owns first, then the user's parameters in key order.
pub fn render_postgresql_conf(parameters: &BTreeMap<String, String>) -> String {
    let mut conf = format!(
        "# Managed by Tusk: change spec.parameters of the PostgreSQL instead.\n\
         listen_addresses = '*'\n\
         port = {POSTGRES_PORT}\n\
         hba_file = '{CONFIG_DIR}/pg_hba.conf'\n\
         ident_file = '{CONFIG_DIR}/pg_ident.conf'\n\
         unix_socket_directories = '/var/run/postgresql'\n\
         password_encryption = 'scram-sha-256'\n"
    );
    if !parameters.is_empty() {
        conf.push_str("# spec.parameters\n");
    }
    for (key, value) in parameters {
        // Single quotes are doubled inside a quoted postgresql.conf value.
        let _ = writeln!(conf, "{key} = '{}'", value.replace('\'', "''"));
    }
    conf
}

/// pg_hba.conf: peer authentication on the local socket (so `kubectl exec … psql -U postgres`
/// works inside the pod) and SCRAM passwords over the network.
pub fn render_hba() -> String {
    "# Managed by Tusk.\n\
     local all all peer\n\
     host  all all 127.0.0.1/32 scram-sha-256\n\
     host  all all ::1/128      scram-sha-256\n\
     host  all all 0.0.0.0/0    scram-sha-256\n\
     host  all all ::/0         scram-sha-256\n"
        .to_owned()
}

/// ConfigMap `<name>-config`.
pub fn config_map(cluster: &Cluster) -> ConfigMap {
    let data = BTreeMap::from([
        (
            "postgresql.conf".to_owned(),
            render_postgresql_conf(&cluster.spec.parameters),
        ),
        ("pg_hba.conf".to_owned(), render_hba()),
        (
            "pg_ident.conf".to_owned(),
            "# Managed by Tusk.\n".to_owned(),
        ),
        (INITDB_SCRIPT_KEY.to_owned(), INITDB_SCRIPT.to_owned()),
    ]);
    ConfigMap {
        metadata: cluster.child_meta(cluster.config_map_name(), Component::Config),
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// SHA-256 over the ConfigMap's keys and values; stamped on the pod template so a configuration
/// change rolls the pod.
pub fn config_checksum(config_map: &ConfigMap) -> String {
    let mut hasher = Sha256::new();
    for (key, value) in config_map.data.iter().flatten() {
        hasher.update(key.as_bytes());
        hasher.update([0]);
        hasher.update(value.as_bytes());
        hasher.update([0]);
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    #[test]
    fn user_parameters_follow_owned_settings_and_are_quoted() {
        let params = BTreeMap::from([
            ("max_connections".to_owned(), "200".to_owned()),
            ("search_path".to_owned(), "'$user', public".to_owned()),
        ]);
        let conf = render_postgresql_conf(&params);
        assert!(conf.contains("port = 5432\n"));
        assert!(conf.contains("hba_file = '/etc/tusk/pg_hba.conf'\n"));
        assert!(conf.ends_with("max_connections = '200'\nsearch_path = '''$user'', public'\n"));
    }

    #[test]
    fn config_map_holds_every_file() {
        let pg = postgresql(MINIMAL);
        let cm = config_map(&Cluster::new(&pg).unwrap());
        assert_eq!(cm.metadata.name.as_deref(), Some("demo-config"));
        let keys: Vec<_> = cm.data.as_ref().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "10-tusk-app.sh",
                "pg_hba.conf",
                "pg_ident.conf",
                "postgresql.conf"
            ]
        );
    }

    #[test]
    fn checksum_changes_with_parameters_only() {
        let a = postgresql(MINIMAL);
        let b = postgresql("storage: {size: 1Gi}\nparameters: {work_mem: 64MB}");
        let sum = |pg| config_checksum(&config_map(&Cluster::new(pg).unwrap()));
        let a2 = a.clone();
        assert_eq!(sum(&a), sum(&a2));
        assert_ne!(sum(&a), sum(&b));
        assert_eq!(sum(&a).len(), 64);
    }
}
