//! Connection parameters (libpq env compatible) and catalog queries over tokio-postgres.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use backup_store::Redacted;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

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
        let deadline = Instant::now() + self.connect_timeout;
        let mut delay = Duration::from_millis(250);
        loop {
            match config.connect(NoTls).await {
                Ok((client, connection)) => {
                    tokio::spawn(async move {
                        if let Err(e) = connection.await {
                            tracing::warn!(error = %e, "database connection closed with an error");
                        }
                    });
                    return Ok(client);
                }
                Err(e) => {
                    let code = e.code().cloned();
                    let fatal = matches!(
                        code,
                        Some(SqlState::INVALID_PASSWORD)
                            | Some(SqlState::INVALID_AUTHORIZATION_SPECIFICATION)
                            | Some(SqlState::INVALID_CATALOG_NAME)
                    );
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
