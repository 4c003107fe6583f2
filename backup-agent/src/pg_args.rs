//! The server a command names on its command line (`--host`, `--port`, …), as connection
//! parameters.

use backup_agent::error::AgentError;
use backup_agent::pg::PgParams;
use backup_store::duration::parse_duration;

use crate::cli::PgArgs;

pub fn pg_params(args: &PgArgs) -> Result<PgParams, AgentError> {
    Ok(PgParams {
        host: args.host.clone(),
        port: args.port,
        user: args.username.clone(),
        password: std::env::var("PGPASSWORD").ok().map(Into::into),
        maintenance_db: args.maintenance_database.clone(),
        bin_dir: args.pg_bin_dir.clone(),
        connect_timeout: parse_duration(&args.connect_timeout)
            .map_err(|e| AgentError::Usage(e.to_string()))?,
        hostaddr: args.hostaddr,
        ssl_mode: args.ssl_mode,
        ssl_root_cert: args.ssl_root_cert.clone(),
        client_certificate: match (&args.ssl_cert, &args.ssl_key) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            (None, None) => None,
            _ => {
                return Err(AgentError::Usage(
                    "PGSSLCERT and PGSSLKEY go together: a client certificate needs its key".into(),
                ));
            }
        },
    })
}
