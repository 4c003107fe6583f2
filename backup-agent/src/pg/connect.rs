//! Connection parameters (libpq env compatible) and catalog queries over tokio-postgres.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use backup_store::Redacted;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::error::AgentError;

/// Where and how to connect. The password only ever comes from PGPASSWORD.
#[derive(Debug, Clone)]
pub struct PgParams {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<Redacted<String>>,
    /// Database used for catalog queries and `pg_dumpall` (PGDATABASE, default `postgres`).
    pub maintenance_db: String,
    /// Directory of pg_dump/pg_restore/psql; PATH when `None`.
    pub bin_dir: Option<PathBuf>,
    /// How long to keep retrying while the server is unreachable or starting up.
    pub connect_timeout: Duration,
    /// The address to dial, `host` still naming the server for TLS (libpq's PGHOSTADDR).
    pub hostaddr: Option<IpAddr>,
    /// TLS, as libpq's PGSSLMODE names it.
    pub ssl_mode: SslMode,
    /// The CA the server's certificate must chain to (PGSSLROOTCERT); required by every mode
    /// that speaks TLS: the agent never sends a password over TLS it has not verified.
    pub ssl_root_cert: Option<PathBuf>,
    /// A client certificate and its key (PGSSLCERT, PGSSLKEY), for a server whose
    /// `pg_hba.conf` asks for one besides the password.
    pub client_certificate: Option<(PathBuf, PathBuf)>,
}

/// libpq's `sslmode` values. `require` and `verify-ca` are held to `verify-full` by the agent's
/// own connections (the CA and the name are always checked); the tools get them as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub fn as_libpq(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The mode the tools get: every mode that requires TLS is held to `verify-full`, as the
    /// agent's own connections are (libpq's `require` would not check the certificate at all,
    /// `verify-ca` not the name).
    pub fn for_tools(self) -> &'static str {
        if self.requires_tls() {
            SslMode::VerifyFull.as_libpq()
        } else {
            self.as_libpq()
        }
    }

    /// Whether this mode refuses a server that does not speak TLS.
    pub fn requires_tls(self) -> bool {
        matches!(
            self,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        )
    }
}

#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub version: String,
    pub version_num: i32,
}

#[derive(Debug, Clone)]
pub struct DatabaseInfo {
    pub name: String,
    pub owner: String,
    pub size_bytes: u64,
}

impl PgParams {
    pub fn target(&self) -> String {
        format!("{}@{}:{}", self.user, self.host, self.port)
    }

    /// Connects to `database`, retrying while the server is unreachable or starting up.
    /// Authentication and missing-database errors fail at once.
    pub async fn connect(&self, database: &str) -> Result<Client, AgentError> {
        let mut config = tokio_postgres::Config::new();
        config
            .host(&self.host)
            .port(self.port)
            .user(&self.user)
            .dbname(database)
            .application_name("tusk-backup-agent")
            .connect_timeout(Duration::from_secs(10));
        if let Some(password) = &self.password {
            config.password(password.expose());
        }
        if let Some(addr) = self.hostaddr {
            config.hostaddr(addr);
        }
        let tls = self.tls()?;
        let deadline = Instant::now() + self.connect_timeout;
        let mut delay = Duration::from_millis(250);
        loop {
            match tusk_pgtls::connect(&config, tls.clone(), "database").await {
                Ok(client) => return Ok(client),
                Err(e) => {
                    let code = e.code().cloned();
                    let fatal = matches!(
                        code,
                        Some(SqlState::INVALID_PASSWORD)
                            | Some(SqlState::INVALID_AUTHORIZATION_SPECIFICATION)
                            | Some(SqlState::INVALID_CATALOG_NAME)
                    );
                    // With its causes: "error performing TLS handshake" alone does not say
                    // that the certificate was refused, nor why.
                    let e = backup_store::store::chain(&e);
                    let message = match code {
                        Some(SqlState::INVALID_PASSWORD) => format!(
                            "authentication failed for {} (check PGUSER/PGPASSWORD): {e}",
                            self.target()
                        ),
                        _ => format!(
                            "cannot connect to {} database {database:?}: {e}",
                            self.target()
                        ),
                    };
                    if fatal || Instant::now() + delay > deadline {
                        return Err(AgentError::Database(message));
                    }
                    tracing::info!(error = %e, target = %self.target(), "database not ready, retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(3));
                }
            }
        }
    }

    /// The verifying connector when the mode speaks TLS (with channel binding required, so a
    /// server asking for a password in clear gets none), `None` for a plain connection.
    fn tls(&self) -> Result<Option<tusk_pgtls::MakeRustlsConnect>, AgentError> {
        if !self.ssl_mode.requires_tls() {
            return Ok(None);
        }
        let root = self.ssl_root_cert.as_ref().ok_or_else(|| {
            AgentError::Usage(format!(
                "PGSSLMODE={} needs PGSSLROOTCERT: the agent verifies every server it speaks TLS to",
                self.ssl_mode.as_libpq()
            ))
        })?;
        let identity = (self.client_certificate.as_ref()).map(|(cert, key)| tusk_pgtls::Identity {
            cert: cert.as_path(),
            key: key.as_path(),
        });
        let tls = tusk_pgtls::verifying_as(root, identity)
            .map_err(|e| AgentError::Usage(e.to_string()))?;
        Ok(Some(tls))
    }

    pub async fn server_info(client: &Client) -> Result<ServerInfo, AgentError> {
        let row = client
            .query_one(
                "SELECT current_setting('server_version'), current_setting('server_version_num')::int",
                &[],
            )
            .await
            .map_err(|e| AgentError::Database(format!("reading server version: {e}")))?;
        Ok(ServerInfo {
            version: row.get(0),
            version_num: row.get(1),
        })
    }

    /// Non-template databases that accept connections, by name.
    pub async fn databases(client: &Client) -> Result<Vec<DatabaseInfo>, AgentError> {
        let rows = client
            .query(
                "SELECT d.datname, pg_get_userbyid(d.datdba), pg_database_size(d.oid) \
                 FROM pg_database d WHERE NOT d.datistemplate AND d.datallowconn ORDER BY 1",
                &[],
            )
            .await
            .map_err(|e| AgentError::Database(format!("listing databases: {e}")))?;
        Ok(rows
            .iter()
            .map(|r| DatabaseInfo {
                name: r.get(0),
                owner: r.get(1),
                size_bytes: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
            })
            .collect())
    }

    /// The names of [`Self::databases`], on a connection of its own.
    pub async fn database_names(&self) -> Result<Vec<String>, AgentError> {
        let client = self.connect(&self.maintenance_db).await?;
        let databases = Self::databases(&client).await?;
        Ok(databases.into_iter().map(|d| d.name).collect())
    }

    /// Whether `database` holds any user relation (tables, views, sequences, ...).
    pub async fn database_has_objects(&self, database: &str) -> Result<bool, AgentError> {
        let client = self.connect(database).await?;
        let row = client
            .query_one(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') \
                 AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'",
                &[],
            )
            .await
            .map_err(|e| AgentError::Database(format!("inspecting database {database:?}: {e}")))?;
        Ok(row.get::<_, i64>(0) > 0)
    }
}
