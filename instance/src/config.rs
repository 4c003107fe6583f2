//! `tusk-instance run`'s configuration, from the environment the operator gives the pod
//! (docs/src/design/replication.md), plus a few hidden overrides that let tests run several instances on
//! one machine.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The contract's PostgreSQL port: members reach each other on it.
pub const PG_PORT: u16 = 5432;

// No Debug: it holds passwords, and nothing should be able to print them.
#[derive(clap::Args, Clone)]
pub struct RunArgs {
    #[arg(long, env = "PGDATA")]
    pub pgdata: PathBuf,
    #[arg(long, env = "TUSK_POD_NAME")]
    pub pod_name: String,
    /// The pod's uid, for the Events about it.
    #[arg(long, env = "TUSK_POD_UID", default_value = "")]
    pub pod_uid: String,
    /// The pod's IP (downward API): published on the Lease while this pod holds it, so
    /// standbys reach a recreated primary at its new address at once.
    #[arg(long, env = "TUSK_POD_IP")]
    pub pod_ip: Option<String>,
    #[arg(long, env = "TUSK_NAMESPACE", default_value = "")]
    pub namespace: String,
    #[arg(long, env = "TUSK_CLUSTER", default_value = "")]
    pub cluster: String,
    #[arg(long, env = "TUSK_LEASE", default_value = "")]
    pub lease: String,
    #[arg(long, env = "TUSK_PEER_DOMAIN", default_value = "")]
    pub peer_domain: String,
    #[arg(long, env = "TUSK_CONFIG_FILE")]
    pub config_file: Option<PathBuf>,
    /// The superuser's password, where no verifier is mounted (`declared_passwords`).
    #[arg(long, env = "POSTGRES_PASSWORD", hide_env_values = true)]
    pub postgres_password: Option<String>,
    #[arg(long, env = "TUSK_APP_USER")]
    pub app_user: Option<String>,
    #[arg(long, env = "TUSK_APP_DATABASE")]
    pub app_database: Option<String>,
    #[arg(long, env = "TUSK_APP_PASSWORD", hide_env_values = true)]
    pub app_password: Option<String>,
    #[arg(long, env = "TUSK_REPLICATION_PASSWORD", hide_env_values = true)]
    pub replication_password: String,
    /// Where Secret `<name>-verifiers` is mounted: the declared passwords' verifiers.
    #[arg(long, env = "TUSK_VERIFIERS_DIR", default_value = tusk_contract::roles::VERIFIERS_DIR)]
    pub verifiers_dir: PathBuf,
    #[arg(long, env = "TUSK_STATUS_PORT", default_value_t = 8000)]
    pub status_port: u16,
    /// `preferred`: while primary, this manager keeps `synchronous_standby_names` at
    /// `ANY min(TUSK_SYNC_NUMBER, streaming replicas)`; absent or `required`: postgresql.conf
    /// (the ConfigMap) decides.
    #[arg(long, env = "TUSK_SYNC_DURABILITY", value_enum)]
    pub sync_durability: Option<SyncDurability>,
    /// The `ANY n` of preferred synchronous durability.
    #[arg(long, env = "TUSK_SYNC_NUMBER")]
    pub sync_number: Option<u32>,

    /// Local PostgreSQL port (tests run several instances on one host).
    #[arg(long, env = "TUSK_PG_PORT", default_value_t = PG_PORT, hide = true)]
    pub pg_port: u16,
    /// Unix socket directory; the passfile lives here too (outside PGDATA).
    #[arg(
        long,
        env = "TUSK_SOCKET_DIR",
        default_value = "/var/run/postgresql",
        hide = true
    )]
    pub socket_dir: PathBuf,
    /// Directory of initdb, postgres, pg_basebackup, pg_rewind; empty: found on PATH, as in
    /// the official images.
    #[arg(long, env = "TUSK_PG_BIN_DIR", hide = true)]
    pub pg_bin_dir: Option<PathBuf>,
    /// The cluster's CA (PEM): every connection to a peer verifies the server's certificate
    /// against it and by name (`sslmode=verify-full`). The operator mounts it here.
    #[arg(long, env = "TUSK_CA_FILE", default_value = "/etc/tusk-tls/ca.crt")]
    pub ca_file: PathBuf,
    /// The status token (`/status` and `/metrics` require it: `Authorization: Bearer`), read
    /// at each request. The operator mounts Secret `<cluster>-monitoring` here.
    #[arg(
        long,
        env = "TUSK_STATUS_TOKEN_FILE",
        default_value = "/etc/tusk-status/token"
    )]
    pub status_token_file: PathBuf,
    /// How often the TLS files are checked for a change (then the server reloads), in
    /// milliseconds.
    #[arg(long, env = "TUSK_TLS_POLL_MS", default_value_t = 10_000, hide = true)]
    pub tls_poll_ms: u64,
    /// `pod=host:port,...`: addresses replacing `<pod>.<TUSK_PEER_DOMAIN>:5432` (tests).
    #[arg(long, env = "TUSK_PEER_HOSTS", default_value = "", hide = true)]
    pub peer_hosts: String,
    /// A JSON file standing in for Secret `<cluster>-declared` (tests).
    #[arg(long, env = "TUSK_DECLARED_FILE", hide = true)]
    pub declared_file: Option<PathBuf>,
    /// A JSON file standing in for the Lease (tests); see `role::FileSource`.
    #[arg(long, env = "TUSK_ROLE_FILE", hide = true)]
    pub role_file: Option<PathBuf>,
    /// How often the role source is polled (and the Lease renewed), in milliseconds.
    #[arg(
        long,
        env = "TUSK_RENEW_INTERVAL_MS",
        default_value_t = 1000,
        hide = true
    )]
    pub renew_interval_ms: u64,
}

impl RunArgs {
    pub fn renew_interval(&self) -> Duration {
        Duration::from_millis(self.renew_interval_ms.max(50))
    }

    /// The mounted server Secret: `TUSK_CA_FILE`'s directory, which holds `tls.crt` and
    /// `tls.key` beside it.
    pub fn tls_dir(&self) -> PathBuf {
        self.ca_file.parent().map(PathBuf::from).unwrap_or_default()
    }

    pub fn tls_poll_interval(&self) -> Duration {
        Duration::from_millis(self.tls_poll_ms.max(100))
    }

    pub fn peers(&self) -> Result<Peers, String> {
        Peers::new(&self.peer_domain, &self.peer_hosts)
    }

    /// `Some(n)` when this manager owns `synchronous_standby_names` (preferred durability).
    pub fn preferred_sync_number(&self) -> Result<Option<u32>, String> {
        match (self.sync_durability, self.sync_number) {
            (Some(SyncDurability::Preferred), Some(n)) if n >= 1 => Ok(Some(n)),
            (Some(SyncDurability::Preferred), _) => Err(
                "TUSK_SYNC_DURABILITY=preferred needs TUSK_SYNC_NUMBER of at least 1".to_string(),
            ),
            _ => Ok(None),
        }
    }
}

/// `spec.replication.synchronous.durability`, as far as the manager is concerned.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncDurability {
    /// postgresql.conf holds `synchronous_standby_names`; the manager leaves it alone.
    Required,
    /// The primary's manager sets it from the replicas that stream.
    Preferred,
}

/// Where a member's PostgreSQL listens: its pod's stable DNS name, never the `-rw` Service.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    domain: String,
    overrides: BTreeMap<String, (String, u16)>,
}

impl Peers {
    pub fn new(domain: &str, overrides: &str) -> Result<Peers, String> {
        let mut map = BTreeMap::new();
        for entry in overrides
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let (pod, addr) = entry
                .split_once('=')
                .ok_or_else(|| format!("TUSK_PEER_HOSTS entry {entry:?} is not pod=host:port"))?;
            let (host, port) = addr
                .rsplit_once(':')
                .ok_or_else(|| format!("TUSK_PEER_HOSTS entry {entry:?} has no port"))?;
            let port = port
                .parse()
                .map_err(|_| format!("TUSK_PEER_HOSTS entry {entry:?}: bad port"))?;
            map.insert(pod.to_string(), (host.to_string(), port));
        }
        Ok(Peers {
            domain: domain.to_string(),
            overrides: map,
        })
    }

    pub fn address(&self, pod: &str) -> (String, u16) {
        if let Some(addr) = self.overrides.get(pod) {
            return addr.clone();
        }
        if self.domain.is_empty() {
            (pod.to_string(), PG_PORT)
        } else {
            (format!("{pod}.{}", self.domain), PG_PORT)
        }
    }
}

/// The physical slot a member streams from: `tusk_<pod>` with `-` as `_` (slot names allow
/// only lower-case letters, digits and underscores).
pub fn slot_name(pod: &str) -> String {
    let cleaned: String = pod
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '_' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '_',
        })
        .collect();
    format!("tusk_{cleaned}")
}

/// The environment variables that carry passwords (the operator fills them from the cluster's
/// Secrets). Read once at start; no child process inherits them, and the manager itself is
/// not dumpable, so its own `/proc/<pid>/environ` is not readable by the postgres user.
/// The bucket's credentials are among them: only the archiver, in the manager, uses them.
pub const SECRET_VARIABLES: [&str; 11] = [
    "POSTGRES_PASSWORD",
    "TUSK_APP_PASSWORD",
    "TUSK_REPLICATION_PASSWORD",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "RESTORE_AWS_ACCESS_KEY_ID",
    "RESTORE_AWS_SECRET_ACCESS_KEY",
    "RESTORE_AWS_SESSION_TOKEN",
    "TUSK_GCS_KEY_JSON",
    "RESTORE_TUSK_GCS_KEY_JSON",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_resolve_to_pod_dns_names_unless_overridden() {
        let peers = Peers::new("demo-hl.ns.svc", "demo-1=127.0.0.1:6543").unwrap();
        assert_eq!(
            peers.address("demo-0"),
            ("demo-0.demo-hl.ns.svc".to_string(), 5432)
        );
        assert_eq!(peers.address("demo-1"), ("127.0.0.1".to_string(), 6543));
        assert!(Peers::new("", "demo-1").is_err());
    }

    #[test]
    fn slot_names_replace_dashes() {
        assert_eq!(slot_name("demo-12"), "tusk_demo_12");
    }
}
