//! Declared databases on the primary: made with their owner, encoding and locale (at creation
//! only: a database restored or made before keeps its own, and a difference is reported), their
//! schemas and extensions made and put back, and dropped only when declared `absent` (which the
//! spec allows only with `dropData: true`).

use tokio_postgres::Client;
use tusk_contract::declared::{Database, Ensure};

use super::{Change, Outcome, execute, server_message};
use crate::context::Context;
use crate::sql::{connect, quote_ident, quote_literal};

/// Makes `database` as declared; its schemas and extensions in a session of its own.
pub(super) async fn keep(
    ctx: &Context,
    client: &Client,
    database: &Database,
    changes: &mut Vec<Change>,
) -> Outcome {
    let name = quote_ident(&database.name).map_err(|e| e.to_string())?;
    let row = client
        .query_opt(
            "SELECT pg_catalog.pg_get_userbyid(datdba)::text, \
             pg_catalog.pg_encoding_to_char(encoding)::text, datcollate::text, datctype::text \
             FROM pg_catalog.pg_database WHERE datname = $1",
            &[&database.name],
        )
        .await
        .map_err(server_message)?;
    if database.ensure == Ensure::Absent {
        if row.is_some() {
            execute(client, &format!("DROP DATABASE {name} WITH (FORCE)")).await?;
            changes.push(Change::warning(
                "DatabaseDropped",
                format!(
                    "database {} dropped, as declared (dropData: true)",
                    database.name
                ),
            ));
        }
        return Ok("Absent");
    }
    let owner = quote_ident(&database.owner).map_err(|e| e.to_string())?;
    let mut mismatch = None;
    match row {
        None => {
            let create = create_statement(database).map_err(|e| e.to_string())?;
            execute(client, &create).await?;
            changes.push(Change::normal(
                "DatabaseCreated",
                format!("database {} created as declared", database.name),
            ));
        }
        Some(row) => {
            let (current_owner, encoding, collate, ctype): (String, String, String, String) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            if current_owner != database.owner {
                execute(client, &format!("ALTER DATABASE {name} OWNER TO {owner}")).await?;
                changes.push(Change::warning(
                    "DatabaseDrift",
                    format!(
                        "database {}: owner put back to {} (was {current_owner})",
                        database.name, database.owner
                    ),
                ));
            }
            mismatch = creation_mismatch(database, &encoding, &collate, &ctype);
        }
    }
    let session = connect(ctx, &database.name)
        .await
        .map_err(|e| e.to_string())?;
    keep_schemas(&session, database, changes).await?;
    keep_extensions(&session, database, changes).await?;
    match mismatch {
        // Everything else is kept; what only a new database could change is reported.
        Some(message) => Err(message),
        None => Ok("Ready"),
    }
}

/// `CREATE DATABASE` with what is declared; from `template0` when an encoding or a locale is
/// (`template1` may hold another).
fn create_statement(database: &Database) -> Result<String, crate::error::Error> {
    let mut sql = format!(
        "CREATE DATABASE {} OWNER {}",
        quote_ident(&database.name)?,
        quote_ident(&database.owner)?
    );
    if database.encoding.is_some() || database.locale.is_some() {
        sql.push_str(" TEMPLATE template0");
    }
    if let Some(encoding) = &database.encoding {
        sql.push_str(&format!(" ENCODING {}", quote_literal(encoding)?));
    }
    if let Some(locale) = &database.locale {
        sql.push_str(&format!(" LOCALE {}", quote_literal(locale)?));
    }
    Ok(sql)
}

/// What the existing database has that differs from what is declared for its creation.
fn creation_mismatch(
    database: &Database,
    encoding: &str,
    collate: &str,
    ctype: &str,
) -> Option<String> {
    let mut found = Vec::new();
    if let Some(declared) = &database.encoding
        && !declared.eq_ignore_ascii_case(encoding)
    {
        found.push(format!("encoding {encoding} (declared {declared})"));
    }
    if let Some(declared) = &database.locale
        && (declared != collate || declared != ctype)
    {
        found.push(format!("locale {collate} (declared {declared})"));
    }
    (!found.is_empty()).then(|| {
        format!(
            "the database has {}: set only when a database is created",
            found.join(" and ")
        )
    })
}

async fn keep_schemas(
    session: &Client,
    database: &Database,
    changes: &mut Vec<Change>,
) -> Result<(), String> {
    for schema in &database.schemas {
        let owner = schema.owner.as_deref().unwrap_or(&database.owner);
        let (name, owner_ident) = (
            quote_ident(&schema.name).map_err(|e| e.to_string())?,
            quote_ident(owner).map_err(|e| e.to_string())?,
        );
        let current: Option<String> = session
            .query_opt(
                "SELECT pg_catalog.pg_get_userbyid(nspowner)::text FROM pg_catalog.pg_namespace \
                 WHERE nspname = $1",
                &[&schema.name],
            )
            .await
            .map_err(server_message)?
            .map(|row| row.get(0));
        let statement = match current.as_deref() {
            None => format!("CREATE SCHEMA {name} AUTHORIZATION {owner_ident}"),
            Some(current) if current != owner => {
                format!("ALTER SCHEMA {name} OWNER TO {owner_ident}")
            }
            Some(_) => continue,
        };
        execute(session, &statement).await?;
        changes.push(Change::normal(
            "SchemaDeclared",
            format!(
                "database {}: schema {} owned by {owner}",
                database.name, schema.name
            ),
        ));
    }
    Ok(())
}

async fn keep_extensions(
    session: &Client,
    database: &Database,
    changes: &mut Vec<Change>,
) -> Result<(), String> {
    for extension in &database.extensions {
        let name = quote_ident(&extension.name).map_err(|e| e.to_string())?;
        let current = session
            .query_opt(
                "SELECT e.extversion::text, n.nspname::text FROM pg_catalog.pg_extension e \
                 JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = $1",
                &[&extension.name],
            )
            .await
            .map_err(server_message)?;
        let mut statements = Vec::new();
        match current {
            None => {
                let mut sql = format!("CREATE EXTENSION {name}");
                if let Some(schema) = &extension.schema {
                    sql.push_str(&format!(
                        " SCHEMA {}",
                        quote_ident(schema).map_err(|e| e.to_string())?
                    ));
                }
                if let Some(version) = &extension.version {
                    sql.push_str(&format!(
                        " VERSION {}",
                        quote_literal(version).map_err(|e| e.to_string())?
                    ));
                }
                statements.push(sql);
            }
            Some(row) => {
                let (version, schema): (String, String) = (row.get(0), row.get(1));
                if let Some(declared) = &extension.version
                    && declared != &version
                {
                    let to = quote_literal(declared).map_err(|e| e.to_string())?;
                    statements.push(format!("ALTER EXTENSION {name} UPDATE TO {to}"));
                }
                if let Some(declared) = &extension.schema
                    && declared != &schema
                {
                    let to = quote_ident(declared).map_err(|e| e.to_string())?;
                    statements.push(format!("ALTER EXTENSION {name} SET SCHEMA {to}"));
                }
            }
        }
        for statement in statements {
            execute(session, &statement)
                .await
                .map_err(|e| format!("extension {}: {e}", extension.name))?;
            changes.push(Change::normal(
                "ExtensionDeclared",
                format!("database {}: {statement}", database.name),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_with_an_encoding_or_locale_is_made_from_template0() {
        let plain = Database {
            name: "shop".into(),
            owner: "shop_owner".into(),
            ..Database::default()
        };
        assert_eq!(
            create_statement(&plain).unwrap(),
            "CREATE DATABASE \"shop\" OWNER \"shop_owner\""
        );
        let localized = Database {
            encoding: Some("UTF8".into()),
            locale: Some("C.UTF-8".into()),
            ..plain
        };
        assert_eq!(
            create_statement(&localized).unwrap(),
            "CREATE DATABASE \"shop\" OWNER \"shop_owner\" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8'"
        );
    }

    #[test]
    fn only_what_was_declared_for_creation_is_compared() {
        let database = Database {
            name: "shop".into(),
            encoding: Some("utf8".into()),
            ..Database::default()
        };
        assert_eq!(creation_mismatch(&database, "UTF8", "C", "C"), None);
        let message = creation_mismatch(&database, "SQL_ASCII", "C", "C").unwrap();
        assert!(
            message.contains("encoding SQL_ASCII (declared utf8)"),
            "{message}"
        );
    }
}
