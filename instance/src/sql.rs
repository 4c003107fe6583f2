//! Connections to the local server over its unix socket, and quoting for the statements that
//! cannot take bind parameters (`CREATE ROLE ... PASSWORD`, `CREATE DATABASE`).

use std::time::Duration;

use tokio_postgres::Client;

use crate::context::Context;
use crate::error::Error;

/// Connects as `postgres` over the local socket (peer authentication in the pods; a password,
/// when the environment has one, is offered only if asked for).
pub async fn connect(ctx: &Context, database: &str) -> Result<Client, Error> {
    let mut config = tokio_postgres::Config::new();
    if let Some(password) = &ctx.args.postgres_password {
        config.password(password);
    }
    config
        .host_path(&ctx.args.socket_dir)
        .port(ctx.args.pg_port)
        .user("postgres")
        .dbname(database)
        .application_name("tusk-instance")
        .connect_timeout(Duration::from_secs(3));
    tusk_pgtls::connect(&config, None, "local")
        .await
        .map_err(Error::sql("connecting to the local server"))
}

/// `"name"` with embedded quotes doubled: an identifier that is always taken literally.
pub fn quote_ident(name: &str) -> Result<String, Error> {
    reject_nul(name)?;
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// A string literal that means `value` whatever `standard_conforming_strings` is: quotes
/// doubled and, when there is a backslash, the `E''` form with backslashes doubled (as
/// PostgreSQL's own `quote_literal` does).
pub fn quote_literal(value: &str) -> Result<String, Error> {
    reject_nul(value)?;
    let quoted = value.replace('\'', "''");
    if quoted.contains('\\') {
        Ok(format!("E'{}'", quoted.replace('\\', "\\\\")))
    } else {
        Ok(format!("'{quoted}'"))
    }
}

fn reject_nul(value: &str) -> Result<(), Error> {
    if value.contains('\0') {
        return Err(Error::Config(
            "a name or password contains a NUL byte".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_double_their_quotes() {
        assert_eq!(quote_ident("app").unwrap(), "\"app\"");
        assert_eq!(quote_ident("a\"; DROP").unwrap(), "\"a\"\"; DROP\"");
        assert!(quote_ident("a\0b").is_err());
    }

    #[test]
    fn literals_survive_quotes_and_backslashes() {
        assert_eq!(quote_literal("pw").unwrap(), "'pw'");
        assert_eq!(quote_literal("it's").unwrap(), "'it''s'");
        assert_eq!(quote_literal(r"a\'b").unwrap(), r"E'a\\''b'");
        assert!(quote_literal("\0").is_err());
    }
}
