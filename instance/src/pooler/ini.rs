//! PgBouncer's configuration and auth file, rendered from the pooler's arguments and the
//! primary it routes to (pure: tested on plain values).

use std::fmt::Write;

/// The admin console's user, in the auth file only (its password never leaves the pod).
pub const ADMIN_USER: &str = "tusk_admin";

/// What the configuration is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub port: u16,
    pub run_dir: String,
    pub tls_dir: String,
    pub pool_mode: String,
    pub default_pool_size: u32,
    pub max_client_conn: u32,
    pub postgres_port: u16,
}

/// `pgbouncer.ini`, every database routed to `host` (the Lease holder's own DNS name, which
/// its server certificate carries, so the server is verified by name), or to nowhere yet.
pub fn render(settings: &Settings, host: Option<&str>) -> String {
    let Settings {
        port,
        run_dir,
        tls_dir,
        pool_mode,
        default_pool_size,
        max_client_conn,
        postgres_port,
    } = settings;
    let mut ini =
        String::from("; Written by tusk-instance pooler; rewritten when the primary moves.\n");
    ini.push_str("[databases]\n");
    match host {
        Some(host) => {
            let _ = writeln!(ini, "* = host={host} port={postgres_port}");
        }
        // No primary known yet: clients wait (and time out) rather than reach anything.
        None => ini.push_str("* = host=/nonexistent port=1\n"),
    }
    let _ = write!(
        ini,
        "\n[pgbouncer]\n\
         listen_addr = *\n\
         listen_port = {port}\n\
         unix_socket_dir = {run_dir}\n\
         auth_type = hba\n\
         auth_hba_file = {run_dir}/hba.conf\n\
         auth_file = {run_dir}/users.txt\n\
         auth_user = {pooler}\n\
         auth_query = SELECT usename, passwd FROM {schema}.lookup($1)\n\
         admin_users = {ADMIN_USER}\n\
         pool_mode = {pool_mode}\n\
         default_pool_size = {default_pool_size}\n\
         max_client_conn = {max_client_conn}\n\
         ignore_startup_parameters = extra_float_digits\n\
         client_tls_sslmode = require\n\
         client_tls_cert_file = {tls_dir}/tls.crt\n\
         client_tls_key_file = {tls_dir}/tls.key\n\
         client_tls_ca_file = {tls_dir}/ca.crt\n\
         server_tls_sslmode = verify-full\n\
         server_tls_ca_file = {tls_dir}/ca.crt\n\
         server_tls_cert_file = {tls_dir}/tls.crt\n\
         server_tls_key_file = {tls_dir}/tls.key\n\
         server_login_retry = 1\n\
         server_connect_timeout = 5\n\
         query_wait_timeout = 120\n\
         dns_max_ttl = 1\n\
         dns_nxdomain_ttl = 1\n\
         log_connections = 0\n\
         log_disconnections = 0\n\
         stats_period = 60\n",
        pooler = tusk_contract::roles::POOLER_USER,
        schema = tusk_contract::roles::POOLER_SCHEMA,
    );
    ini
}

/// Who may log in to PgBouncer, and how. Everyone in the auth file could otherwise log in
/// as themselves (`tusk_pooler`, whose server sessions run the password lookup, with its empty
/// entry): the lookup role never, the admin console on the pod's own socket only, every other
/// role with SCRAM over TLS (what PgBouncer needs to pass the keys on).
pub fn hba() -> String {
    let pooler = tusk_contract::roles::POOLER_USER;
    format!(
        "local   all       {pooler}  reject\n\
         host    all       {pooler}  0.0.0.0/0  reject\n\
         host    all       {pooler}  ::/0       reject\n\
         local   pgbouncer {ADMIN_USER}   scram-sha-256\n\
         host    all       {ADMIN_USER}   0.0.0.0/0  reject\n\
         host    all       {ADMIN_USER}   ::/0       reject\n\
         hostssl all       all          0.0.0.0/0  scram-sha-256\n\
         hostssl all       all          ::/0       scram-sha-256\n"
    )
}

/// The auth file: the admin console's password, and the lookup role without one (it logs in
/// to PostgreSQL by certificate).
pub fn users(admin_password: &str) -> String {
    format!(
        "\"{ADMIN_USER}\" \"{admin_password}\"\n\"{}\" \"\"\n",
        tusk_contract::roles::POOLER_USER
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            port: 6432,
            run_dir: "/run/pooler".into(),
            tls_dir: "/etc/tusk-pooler-tls".into(),
            pool_mode: "transaction".into(),
            default_pool_size: 20,
            max_client_conn: 1000,
            postgres_port: 5432,
        }
    }

    #[test]
    fn every_database_goes_to_the_holder_by_its_certified_name() {
        let ini = render(&settings(), Some("shop-1.shop-hl.prod.svc"));
        assert!(ini.contains("[databases]\n* = host=shop-1.shop-hl.prod.svc port=5432\n"));
        assert!(ini.contains("server_tls_sslmode = verify-full\n"));
        assert!(ini.contains("client_tls_sslmode = require\n"));
        assert!(ini.contains("auth_type = hba\nauth_hba_file = /run/pooler/hba.conf\n"));
        assert!(ini.contains("auth_query = SELECT usename, passwd FROM tusk_pooler.lookup($1)\n"));
        assert!(ini.contains("pool_mode = transaction\n"));
    }

    #[test]
    fn without_a_holder_nothing_is_reachable() {
        let ini = render(&settings(), None);
        assert!(ini.contains("* = host=/nonexistent port=1\n"));
    }

    #[test]
    fn neither_the_lookup_role_nor_the_admin_may_log_in_from_the_network() {
        let hba = hba();
        let lines: Vec<Vec<&str>> = hba
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let first = |user: &str, kind: &str| {
            lines
                .iter()
                .find(|l| l[0] == kind && (l[2] == user || l[2] == "all"))
                .map(|l| l[l.len() - 1])
        };
        assert_eq!(first("tusk_pooler", "local"), Some("reject"));
        assert_eq!(first("tusk_pooler", "host"), Some("reject"));
        assert_eq!(first("tusk_admin", "host"), Some("reject"));
        assert_eq!(first("tusk_admin", "local"), Some("scram-sha-256"));
        assert_eq!(first("shop_owner", "hostssl"), Some("scram-sha-256"));
    }

    #[test]
    fn the_lookup_role_has_no_password_in_the_auth_file() {
        let users = users("s3cret");
        assert_eq!(users, "\"tusk_admin\" \"s3cret\"\n\"tusk_pooler\" \"\"\n");
    }
}
