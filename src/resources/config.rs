//! The ConfigMap: postgresql.conf (Tusk's settings, then `spec.parameters`) and pg_hba.conf. The
//! instance manager creates the application role and database on first start.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

use super::archive::wal_archiving;
use super::{Cluster, Component, POSTGRES_PORT};
use crate::crd::{MAX_INSTANCES, OPERATOR_OWNED_PARAMETERS, parameter_refusal};

/// Where the ConfigMap's configuration files are mounted in the PostgreSQL container.
pub const CONFIG_DIR: &str = "/etc/tusk";
/// Where the database pods mount Secret `<name>-server-tls` (`resources::tls`).
pub const TLS_DIR: &str = "/etc/tusk-tls";
/// A `spec.parameters` entry that cannot be written to postgresql.conf safely. CEL refuses
/// these at `kubectl apply`; the builder checks again so that neither quoting nor what the
/// server runs depends on the API server having had the rule (older objects, rule changes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParameterError {
    #[error("spec.parameters key {0:?} is not a postgresql.conf name")]
    Key(String),
    #[error("spec.parameters key {0:?} is managed by Tusk")]
    Owned(String),
    #[error("spec.parameters.{key} must be a single line without NUL characters")]
    Value { key: String },
    #[error("spec.parameters.{key}: {reason}")]
    Refused { key: String, reason: String },
}

/// `synchronous_standby_names` for `spec.replication.synchronous` with `required` durability:
/// any `number` of the cluster's instances, named as they connect (`application_name` is the
/// pod's name). Every name the cluster could ever have is listed, not just today's `instances`,
/// so scaling does not change the configuration (which would restart every pod); names that do
/// not connect count for nothing, and the primary never streams from itself. With `preferred`
/// durability the primary's instance manager sets it instead, from the replicas that stream
/// (docs/src/design/replication.md).
pub fn synchronous_standby_names(cluster: &Cluster) -> Option<String> {
    let synchronous = cluster.spec.replication.as_ref()?.synchronous.as_ref()?;
    if !synchronous.is_required() {
        return None;
    }
    // The set's own members: an upgrade's new set has its own ConfigMap.
    let set = cluster.instance_set;
    let names: Vec<String> = (0..MAX_INSTANCES)
        .map(|ordinal| format!("\"{set}-{ordinal}\""))
        .collect();
    Some(format!("ANY {} ({})", synchronous.number, names.join(", ")))
}

/// postgresql.conf: the settings Tusk owns first (with `synchronous`, the value of
/// `synchronous_standby_names`), then the user's parameters in key order.
pub fn render_postgresql_conf(
    parameters: &BTreeMap<String, String>,
    synchronous: Option<&str>,
    archive_timeout_seconds: Option<i32>,
) -> Result<String, ParameterError> {
    let mut conf = format!(
        "# Managed by Tusk: change spec.parameters of the PostgreSQL instead.\n\
         listen_addresses = '*'\n\
         port = {POSTGRES_PORT}\n\
         hba_file = '{CONFIG_DIR}/pg_hba.conf'\n\
         ident_file = '{CONFIG_DIR}/pg_ident.conf'\n\
         unix_socket_directories = '/var/run/postgresql'\n\
         password_encryption = 'scram-sha-256'\n\
         # TLS with the cluster's own certificate (Secret <name>-server-tls).\n\
         ssl = on\n\
         ssl_cert_file = '{TLS_DIR}/tls.crt'\n\
         ssl_key_file = '{TLS_DIR}/tls.key'\n\
         ssl_ca_file = '{TLS_DIR}/ca.crt'\n\
         wal_log_hints = on\n\
         # A standby retries streaming after 1 s, not 5 s, once its primary restarted or moved:\n\
         # with synchronous replication the primary's commits wait for that reconnect.\n\
         wal_retrieve_retry_interval = '1s'\n\
         # A standby notices a primary that vanished without closing its connection (a deleted\n\
         # pod, a lost node) after 5 s, not 60 s, and reconnects to where it is now; the primary\n\
         # likewise drops a vanished standby. Synchronous commits wait for exactly that.\n\
         wal_receiver_timeout = '5s'\n\
         wal_sender_timeout = '5s'\n"
    );
    // TLS 1.3 only unless spec.parameters allows older clients in.
    if !parameters.contains_key("ssl_min_protocol_version") {
        conf.push_str("ssl_min_protocol_version = 'TLSv1.3'\n");
    }
    if let Some(names) = synchronous {
        let _ = writeln!(conf, "synchronous_standby_names = {}", quote(names));
    }
    if let Some(timeout) = archive_timeout_seconds {
        conf.push_str(&super::archive::archive_settings(timeout));
    }
    if !parameters.is_empty() {
        conf.push_str("# spec.parameters\n");
    }
    for (key, value) in parameters {
        check_parameter(key, value)?;
        let _ = writeln!(conf, "{key} = {}", quote(value));
    }
    Ok(conf)
}

fn check_parameter(key: &str, value: &str) -> Result<(), ParameterError> {
    let mut chars = key.chars();
    let is_name = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
    if !is_name {
        return Err(ParameterError::Key(key.to_owned()));
    }
    if OPERATOR_OWNED_PARAMETERS.contains(&key) {
        return Err(ParameterError::Owned(key.to_owned()));
    }
    // The lexer ends a value at a line break; a NUL ends the C string the server reads.
    if value.contains(['\n', '\r', '\0']) {
        return Err(ParameterError::Value {
            key: key.to_owned(),
        });
    }
    match parameter_refusal(key, value) {
        Some(reason) => Err(ParameterError::Refused {
            key: key.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// PostgreSQL's built-in values of the hot-standby settings, which apply where neither Tusk nor
/// `spec.parameters` sets one.
const HOT_STANDBY_DEFAULTS: [(&str, i64); 5] = [
    ("max_connections", 100),
    ("max_worker_processes", 8),
    ("max_wal_senders", 10),
    ("max_prepared_transactions", 0),
    ("max_locks_per_transaction", 64),
];

/// What every pod runs once a rollout of `parameters` is done, for each hot-standby setting
/// (`tusk_contract::status::HOT_STANDBY_SETTINGS`); a value that is not a plain number is left
/// out (nothing is compared for it).
pub fn hot_standby_values(parameters: &BTreeMap<String, String>) -> BTreeMap<String, i64> {
    HOT_STANDBY_DEFAULTS
        .iter()
        .filter_map(|(name, default)| {
            let value = match parameters.get(*name) {
                Some(value) => value.trim().parse().ok()?,
                None => *default,
            };
            Some(((*name).to_owned(), value))
        })
        .collect()
}

/// A quoted postgresql.conf value. Inside quotes the server's lexer reads `\` as an escape
/// (`\n`, `\'`, octal), so backslashes are doubled; a single quote is written twice.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

/// ConfigMap `<name>-config`.
pub fn config_map(cluster: &Cluster) -> Result<ConfigMap, ParameterError> {
    let data = BTreeMap::from([
        (
            "postgresql.conf".to_owned(),
            render_postgresql_conf(
                &cluster.spec.parameters,
                synchronous_standby_names(cluster).as_deref(),
                wal_archiving(cluster).map(|a| a.timeout_seconds),
            )?,
        ),
        (
            "pg_hba.conf".to_owned(),
            super::hba::render_hba(
                cluster.user_server_secret().is_none(),
                cluster.spec.superuser_access,
                &cluster.spec.pg_hba,
            ),
        ),
        (
            "pg_ident.conf".to_owned(),
            "# Managed by Tusk.\n".to_owned(),
        ),
    ]);
    Ok(ConfigMap {
        metadata: cluster.child_meta(cluster.config_map_name(), Component::Config),
        data: Some(data),
        ..ConfigMap::default()
    })
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

    #[test]
    fn hot_standby_values_are_the_parameters_or_postgresqls_defaults() {
        let parameters = BTreeMap::from([
            ("max_connections".to_owned(), " 150 ".to_owned()),
            ("max_wal_senders".to_owned(), "lots".to_owned()),
        ]);
        let values = hot_standby_values(&parameters);
        assert_eq!(values.get("max_connections"), Some(&150));
        assert_eq!(values.get("max_locks_per_transaction"), Some(&64));
        assert_eq!(
            values.get("max_wal_senders"),
            None,
            "not a number: not compared"
        );
        let names: Vec<&str> = HOT_STANDBY_DEFAULTS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, tusk_contract::status::HOT_STANDBY_SETTINGS);
    }
    use crate::resources::fixtures::*;

    #[test]
    fn user_parameters_follow_owned_settings_and_are_quoted() {
        let params = BTreeMap::from([
            ("max_connections".to_owned(), "200".to_owned()),
            ("search_path".to_owned(), "'$user', public".to_owned()),
        ]);
        let conf = render_postgresql_conf(&params, None, None).unwrap();
        assert!(conf.contains("port = 5432\n"));
        assert!(conf.contains("hba_file = '/etc/tusk/pg_hba.conf'\n"));
        assert!(conf.ends_with("max_connections = '200'\nsearch_path = '''$user'', public'\n"));
    }

    #[test]
    fn replication_notices_a_vanished_peer_in_seconds_unless_the_user_says_otherwise() {
        let conf = render_postgresql_conf(&BTreeMap::new(), None, None).unwrap();
        assert!(conf.contains("wal_retrieve_retry_interval = '1s'\n"));
        assert!(conf.contains("wal_receiver_timeout = '5s'\n"));
        assert!(conf.contains("wal_sender_timeout = '5s'\n"));
        // The last line of a name wins in postgresql.conf: the user's value comes after.
        let params = BTreeMap::from([("wal_retrieve_retry_interval".to_owned(), "5s".to_owned())]);
        let conf = render_postgresql_conf(&params, None, None).unwrap();
        let ours = conf.find("wal_retrieve_retry_interval = '1s'").unwrap();
        let theirs = conf.find("wal_retrieve_retry_interval = '5s'").unwrap();
        assert!(ours < theirs);
    }

    /// A quoted value as PostgreSQL's configuration lexer reads it (guc-file.l: the token
    /// `'([^'\\\n]|\\.|'')*'`, then DeescapeQuotedString), or None if the line is invalid.
    fn read_back(line_rest: &str) -> Option<String> {
        let mut chars = line_rest.strip_prefix('\'')?.chars().peekable();
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\n' => return None,
                '\\' => match chars.next()? {
                    '\n' => return None,
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    'r' => value.push('\r'),
                    'b' => value.push('\u{8}'),
                    'f' => value.push('\u{c}'),
                    // Octal escapes are not needed by the values below.
                    c => value.push(c),
                },
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    value.push('\'');
                }
                '\'' => return chars.eq("\n".chars()).then_some(value),
                c => value.push(c),
            }
        }
    }

    #[test]
    fn every_value_reads_back_as_written() {
        for value in [
            r"C:\",
            r"\",
            r"a\nb",
            r"it's",
            r"\'",
            r"'\",
            "tab\there",
            r"\101",
        ] {
            let params = BTreeMap::from([("application_name".to_owned(), value.to_owned())]);
            let conf = render_postgresql_conf(&params, None, None).unwrap();
            let (_, line) = conf.split_once("application_name = ").unwrap();
            assert_eq!(read_back(line).as_deref(), Some(value), "{line:?}");
        }
    }

    #[test]
    fn unsafe_parameters_are_refused_by_the_builder_too() {
        let render = |key: &str, value: &str| {
            render_postgresql_conf(
                &BTreeMap::from([(key.to_owned(), value.to_owned())]),
                None,
                None,
            )
        };
        let refused = |key: &str, value: &str| render(key, value).unwrap_err().to_string();
        assert!(refused("work_mem", "1MB\nport = 1").contains("single line"));
        assert!(refused("work_mem", "1MB\r").contains("single line"));
        assert!(refused("work_mem", "1MB\0").contains("single line"));
        assert!(refused("work mem", "1MB").contains("not a postgresql.conf name"));
        assert!(refused("port", "5433").contains("managed by Tusk"));
        for key in [
            "archive_command",
            "restore_command",
            "ssl_passphrase_command",
            "dynamic_library_path",
        ] {
            assert!(
                refused(key, "/bin/true").contains("run commands or load code"),
                "{key}"
            );
        }
        assert!(
            refused("shared_preload_libraries", "pg_stat_statements,/tmp/evil")
                .contains("may only list")
        );
        assert!(refused("session_preload_libraries", "$libdir/evil").contains("may only list"));
        assert!(
            render(
                "shared_preload_libraries",
                " pg_stat_statements, \"auto_explain\""
            )
            .is_ok()
        );
        assert!(render("shared_preload_libraries", "").is_ok());
    }

    #[test]
    fn synchronous_replication_waits_for_any_n_of_the_instances() {
        let pg = postgresql(
            "instances: 3\nreplication: {synchronous: {number: 1}}\nstorage: {size: 1Gi}",
        );
        let cm = config_map(&Cluster::new(&pg).unwrap()).unwrap();
        let conf = &cm.data.unwrap()["postgresql.conf"];
        assert!(
            conf.contains(
                "synchronous_standby_names = 'ANY 1 (\"demo-0\", \"demo-1\", \"demo-2\", \
                 \"demo-3\", \"demo-4\", \"demo-5\", \"demo-6\", \"demo-7\", \"demo-8\")'\n"
            ),
            "{conf}"
        );
        // Scaling leaves the configuration (and so the pods) alone.
        let scaled = postgresql(
            "instances: 5\nreplication: {synchronous: {number: 1}}\nstorage: {size: 1Gi}",
        );
        let scaled = config_map(&Cluster::new(&scaled).unwrap()).unwrap();
        assert_eq!(scaled.data.unwrap()["postgresql.conf"], *conf);
        let plain = config_map(&Cluster::new(&postgresql(MINIMAL)).unwrap()).unwrap();
        assert!(!plain.data.unwrap()["postgresql.conf"].contains("synchronous_standby_names"));
    }

    #[test]
    fn preferred_durability_leaves_synchronous_standby_names_to_the_primary_manager() {
        let pg = postgresql(
            "instances: 3\nreplication: {synchronous: {number: 1, durability: preferred}}\n\
             storage: {size: 1Gi}",
        );
        let cm = config_map(&Cluster::new(&pg).unwrap()).unwrap();
        assert!(!cm.data.unwrap()["postgresql.conf"].contains("synchronous_standby_names"));
    }

    #[test]
    fn config_map_holds_every_file() {
        let pg = postgresql(MINIMAL);
        let cm = config_map(&Cluster::new(&pg).unwrap()).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("demo-config"));
        let keys: Vec<_> = cm.data.as_ref().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["pg_hba.conf", "pg_ident.conf", "postgresql.conf"]);
        // Replicas stream as tusk_replication, with a password and the certificate Tusk
        // issued, from any address; with the user's certificates, by password only.
        let hba = &cm.data.as_ref().unwrap()["pg_hba.conf"];
        assert!(hba.contains(
            "hostssl   replication tusk_replication all  scram-sha-256 clientcert=verify-full\n"
        ));
        let brought = postgresql("storage: {size: 1Gi}\ntls: {serverSecret: shop-tls}");
        let cm = config_map(&Cluster::new(&brought).unwrap()).unwrap();
        let hba_brought = &cm.data.as_ref().unwrap()["pg_hba.conf"];
        assert!(
            hba_brought.contains("hostssl   replication tusk_replication all  scram-sha-256\n")
        );
        // Plaintext is refused before any rule could accept it.
        let first_network_rules: Vec<&str> = hba
            .lines()
            .filter(|l| l.starts_with("host"))
            .take(2)
            .collect();
        assert!(
            first_network_rules
                .iter()
                .all(|l| l.starts_with("hostnossl") && l.ends_with("reject")),
            "{hba}"
        );
    }

    #[test]
    fn checksum_changes_with_parameters_only() {
        let a = postgresql(MINIMAL);
        let b = postgresql("storage: {size: 1Gi}\nparameters: {work_mem: 64MB}");
        let sum = |pg| config_checksum(&config_map(&Cluster::new(pg).unwrap()).unwrap());
        let a2 = a.clone();
        assert_eq!(sum(&a), sum(&a2));
        assert_ne!(sum(&a), sum(&b));
        assert_eq!(sum(&a).len(), 64);
    }
}
