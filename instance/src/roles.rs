//! The roles the manager makes on its primary: the app owner and database and the machine roles
//! (`machine_roles`) at the first start, this cluster's passwords on a restored system, and the
//! machine roles kept as this version wants them. Passwords go to the server as SCRAM-SHA-256
//! verifiers, in a session that logs no statement.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::context::Context;
use crate::declared_passwords::{self, Credential};
use crate::error::Error;
use crate::machine_roles::{
    self, BACKUP_OPTIONS, BACKUP_USER, REPLICATION_USER, REWIND_OPTIONS, REWIND_USER,
};
use crate::sql::{connect, quote_ident, quote_literal};

/// After a restore: the restored system's roles take this cluster's passwords (its Secrets),
/// the superuser's included, and the app role and database exist.
pub async fn adopt_roles(ctx: &Context) -> Result<(), Error> {
    create_roles(ctx).await?;
    let client = silent_session(ctx).await?;
    let superuser = declared_passwords::superuser(ctx)?;
    ensure_role(&client, "postgres", "SUPERUSER LOGIN", &superuser).await
}

/// The session the first-start SQL runs in: no statement is logged, not even one that fails
/// (`log_min_error_statement` would print a failing `ALTER ROLE … PASSWORD` with its password),
/// and commits are local (see [`create_roles`]).
const SILENT_SESSION: &str = "SET log_statement = 'none'; SET log_min_duration_statement = -1; \
     SET log_min_error_statement = 'panic'; SET synchronous_commit = 'local'";

/// The machine roles (`machine_roles`) and the app role and database; idempotent, so a retried bootstrap
/// completes. Statements with passwords are kept out of the server log. Commits are local: with
/// synchronous replication configured they would otherwise wait for a standby that cannot
/// exist before this first start has finished (the e2e samples' HA cluster hung here).
pub async fn create_roles(ctx: &Context) -> Result<(), Error> {
    let client = silent_session(ctx).await?;
    ensure_machine_roles(ctx, &client).await?;
    if let (Some(user), Some(credential)) = (&ctx.args.app_user, declared_passwords::app(ctx)?) {
        ensure_role(&client, user, "LOGIN", &credential).await?;
        if let Some(database) = &ctx.args.app_database {
            let exists = client
                .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[database])
                .await
                .map_err(Error::sql("looking up the app database"))?;
            if exists.is_none() {
                let sql = format!(
                    "CREATE DATABASE {} OWNER {}",
                    quote_ident(database)?,
                    quote_ident(user)?
                );
                client
                    .batch_execute(&sql)
                    .await
                    .map_err(Error::sql("creating the app database"))?;
            }
        }
    }
    Ok(())
}

/// `tusk_replication`, `tusk_rewind` and `tusk_backup` with their passwords and grants, in `client`'s silent
/// session.
async fn ensure_machine_roles(ctx: &Context, client: &tokio_postgres::Client) -> Result<(), Error> {
    let password = &Credential::Password(ctx.args.replication_password.clone());
    ensure_role(client, REPLICATION_USER, "LOGIN REPLICATION", password).await?;
    ensure_role(client, REWIND_USER, REWIND_OPTIONS, password).await?;
    ensure_role(client, BACKUP_USER, BACKUP_OPTIONS, password).await?;
    machine_roles::grant(client).await
}

/// The machine roles as this version of the manager wants them, on a running primary (one
/// created by an older version lacks `tusk_backup` and the grants): made once per process
/// (`kept`), then only CONNECT on databases created since.
/// In the same session, the declared passwords (`declared_passwords`); returns the roles
/// whose password it changed.
pub async fn keep_machine_roles(
    ctx: &Context,
    kept: &AtomicBool,
    verifiers: Option<&std::collections::BTreeMap<String, k8s_openapi::ByteString>>,
) -> Result<Vec<String>, Error> {
    let client = silent_session(ctx).await?;
    if kept.load(Ordering::Relaxed) {
        machine_roles::connect_everywhere(&client).await?;
    } else {
        ensure_machine_roles(ctx, &client).await?;
        kept.store(true, Ordering::Relaxed);
    }
    crate::declared_passwords::keep(ctx, &client, verifiers).await
}

/// A local connection in the [`SILENT_SESSION`].
pub(crate) async fn silent_session(ctx: &Context) -> Result<tokio_postgres::Client, Error> {
    let client = connect(ctx, "postgres").await?;
    client
        .batch_execute(SILENT_SESSION)
        .await
        .map_err(Error::sql("silencing statement logging"))?;
    Ok(client)
}

async fn ensure_role(
    client: &tokio_postgres::Client,
    role: &str,
    options: &str,
    password: &Credential,
) -> Result<(), Error> {
    let exists = client
        .query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&role])
        .await
        .map_err(Error::sql(format!("looking up role {role}")))?;
    let verb = if exists.is_some() { "ALTER" } else { "CREATE" };
    client
        .batch_execute(&role_statement(verb, role, options, password)?)
        .await
        .map_err(Error::sql(format!("{verb} ROLE {role}")))
}

/// `CREATE`/`ALTER ROLE` with a SCRAM-SHA-256 verifier (the declared one, or a password's with
/// a new salt), never the password: nothing the server keeps of the statement
/// (`pg_stat_statements`, a log line a setting turned back on) holds it, and a verifier does
/// not log anyone in.
fn role_statement(
    verb: &str,
    role: &str,
    options: &str,
    password: &Credential,
) -> Result<String, Error> {
    let verifier = password.verifier();
    Ok(format!(
        "{verb} ROLE {} {options} PASSWORD {}",
        quote_ident(role)?,
        quote_literal(&verifier)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_gets_its_password_as_a_scram_verifier_never_in_clear() {
        let password = Credential::Password("pa'ss:word".into());
        let sql = role_statement("CREATE", "tusk_backup", "LOGIN", &password).unwrap();
        assert!(!sql.contains("pa'ss") && !sql.contains("pa''ss"), "{sql}");
        assert!(
            sql.starts_with("CREATE ROLE \"tusk_backup\" LOGIN PASSWORD 'SCRAM-SHA-256$4096:"),
            "{sql}"
        );
    }

    #[test]
    fn the_first_start_session_logs_no_statement_even_a_failing_one() {
        for setting in [
            "log_statement = 'none'",
            "log_min_duration_statement = -1",
            "log_min_error_statement = 'panic'",
        ] {
            assert!(SILENT_SESSION.contains(setting), "{setting}");
        }
    }
}
