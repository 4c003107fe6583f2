//! Declared roles on the primary: made, put back when changed by hand (attributes, password,
//! memberships), dropped when declared `absent`, and disabled (no login, no password) once no
//! longer declared if Tusk made them. Passwords are set as the declared SCRAM verifiers.

use std::collections::BTreeSet;

use tokio_postgres::Client;
use tusk_contract::declared::{Ensure, ROLE_MARK, Role};

use super::{Change, Outcome, execute, server_message};
use crate::sql::{quote_ident, quote_literal};

/// A role as the server has it, against a declaration.
struct Current {
    login: bool,
    inherit: bool,
    create_db: bool,
    create_role: bool,
    connection_limit: i32,
    /// `rolvaliduntil` is what the declaration says.
    valid_until_agrees: bool,
    password: Option<String>,
    /// SUPERUSER, REPLICATION or BYPASSRLS: never what a declared role is.
    privileged: bool,
    marked: bool,
}

async fn current(client: &Client, role: &Role) -> Result<Option<Current>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT rolcanlogin, rolinherit, rolcreatedb, rolcreaterole, rolconnlimit, \
             CASE WHEN $2::text IS NULL THEN rolvaliduntil IS NULL OR rolvaliduntil = 'infinity' \
                  ELSE COALESCE(rolvaliduntil = $2::text::timestamptz, false) END, \
             rolpassword, rolsuper OR rolreplication OR rolbypassrls, \
             COALESCE(shobj_description(oid, 'pg_authid') = $3, false) \
             FROM pg_catalog.pg_authid WHERE rolname = $1",
            &[&role.name, &role.valid_until, &ROLE_MARK],
        )
        .await?;
    Ok(row.map(|row| Current {
        login: row.get(0),
        inherit: row.get(1),
        create_db: row.get(2),
        create_role: row.get(3),
        connection_limit: row.get(4),
        valid_until_agrees: row.get(5),
        password: row.get(6),
        privileged: row.get(7),
        marked: row.get(8),
    }))
}

/// What differs between the server's role and the declaration, in words for the Event.
fn drift(current: &Current, role: &Role) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let pairs = [
        (current.login != role.login, "login"),
        (current.inherit != role.inherit, "inherit"),
        (current.create_db != role.create_db, "createDb"),
        (current.create_role != role.create_role, "createRole"),
        (
            current.connection_limit != role.connection_limit,
            "connectionLimit",
        ),
        (!current.valid_until_agrees, "validUntil"),
        (current.password != role.verifier, "password"),
        (current.privileged, "superuser/replication/bypassrls"),
    ];
    for (differs, what) in pairs {
        if differs {
            changed.push(what);
        }
    }
    changed
}

/// The attributes of `CREATE`/`ALTER ROLE` that make a role exactly as declared.
pub(super) fn attributes(role: &Role) -> Result<String, crate::error::Error> {
    let flag = |on: bool, name: &str| {
        if on {
            name.to_owned()
        } else {
            format!("NO{name}")
        }
    };
    let valid_until = match &role.valid_until {
        Some(at) => quote_literal(at)?,
        None => "'infinity'".to_owned(),
    };
    let password = match &role.verifier {
        Some(verifier) => quote_literal(verifier)?,
        None => "NULL".to_owned(),
    };
    Ok(format!(
        "{} {} {} {} NOSUPERUSER NOREPLICATION NOBYPASSRLS CONNECTION LIMIT {} VALID UNTIL {valid_until} PASSWORD {password}",
        flag(role.login, "LOGIN"),
        flag(role.inherit, "INHERIT"),
        flag(role.create_db, "CREATEDB"),
        flag(role.create_role, "CREATEROLE"),
        role.connection_limit,
    ))
}

/// Makes `role` as declared (or drops it); its memberships come in [`keep_memberships`], once
/// every declared role exists.
pub(super) async fn keep(client: &Client, role: &Role, changes: &mut Vec<Change>) -> Outcome {
    let name = quote_ident(&role.name).map_err(|e| e.to_string())?;
    let current = current(client, role).await.map_err(server_message)?;
    if role.ensure == Ensure::Absent {
        if current.is_some() {
            execute(client, &format!("DROP ROLE {name}")).await?;
            changes.push(Change::normal(
                "RoleDropped",
                format!("role {} dropped, as declared", role.name),
            ));
        }
        return Ok("Absent");
    }
    let attributes = attributes(role).map_err(|e| e.to_string())?;
    let mark = format!(
        "COMMENT ON ROLE {name} IS {}",
        quote_literal(ROLE_MARK).map_err(|e| e.to_string())?
    );
    match current {
        None => {
            execute(client, &format!("CREATE ROLE {name} {attributes}; {mark}")).await?;
            changes.push(Change::normal(
                "RoleCreated",
                format!("role {} created as declared", role.name),
            ));
        }
        Some(current) => {
            let drift = drift(&current, role);
            if !drift.is_empty() {
                execute(client, &format!("ALTER ROLE {name} {attributes}")).await?;
            }
            if !current.marked {
                execute(client, &mark).await?;
                changes.push(Change::normal(
                    "RoleAdopted",
                    format!("role {} existed; now kept as declared", role.name),
                ));
            } else if !drift.is_empty() {
                changes.push(Change::warning(
                    "RoleDrift",
                    format!(
                        "role {}: {} put back as declared",
                        role.name,
                        drift.join(", ")
                    ),
                ));
            }
        }
    }
    Ok("Ready")
}

/// Makes `role`'s memberships exactly its `inRoles`: a missing one granted, one granted by hand
/// revoked.
pub(super) async fn keep_memberships(
    client: &Client,
    role: &Role,
    changes: &mut Vec<Change>,
) -> Outcome {
    if role.ensure == Ensure::Absent {
        return Ok("Absent");
    }
    let rows = client
        .query(
            "SELECT DISTINCT g.rolname::text FROM pg_catalog.pg_auth_members m \
             JOIN pg_catalog.pg_roles g ON g.oid = m.roleid \
             JOIN pg_catalog.pg_roles u ON u.oid = m.member WHERE u.rolname = $1",
            &[&role.name],
        )
        .await
        .map_err(server_message)?;
    let held: BTreeSet<String> = rows.iter().map(|row| row.get(0)).collect();
    let wanted: BTreeSet<String> = role.in_roles.iter().cloned().collect();
    let name = quote_ident(&role.name).map_err(|e| e.to_string())?;
    let mut moved = Vec::new();
    for group in wanted.difference(&held) {
        let group_ident = quote_ident(group).map_err(|e| e.to_string())?;
        execute(client, &format!("GRANT {group_ident} TO {name}")).await?;
        moved.push(format!("+{group}"));
    }
    for group in held.difference(&wanted) {
        let group_ident = quote_ident(group).map_err(|e| e.to_string())?;
        execute(client, &format!("REVOKE {group_ident} FROM {name}")).await?;
        moved.push(format!("-{group}"));
    }
    if !moved.is_empty() {
        changes.push(Change::normal(
            "RoleMembership",
            format!("role {}: memberships {}", role.name, moved.join(" ")),
        ));
    }
    Ok("Ready")
}

/// Roles Tusk made from a declaration that is gone: no login, no password (never dropped: a
/// role may own objects, and dropping is what `ensure: absent` is for). Returns their names.
pub(super) async fn disable_undeclared(
    client: &Client,
    declared: &BTreeSet<&str>,
    changes: &mut Vec<Change>,
) -> Result<Vec<String>, String> {
    let rows = client
        .query(
            "SELECT rolname::text, rolcanlogin OR rolpassword IS NOT NULL \
             FROM pg_catalog.pg_authid WHERE shobj_description(oid, 'pg_authid') = $1",
            &[&ROLE_MARK],
        )
        .await
        .map_err(server_message)?;
    let mut disabled = Vec::new();
    for row in rows {
        let (role, usable): (String, bool) = (row.get(0), row.get(1));
        if declared.contains(role.as_str()) {
            continue;
        }
        if usable {
            let name = quote_ident(&role).map_err(|e| e.to_string())?;
            execute(client, &format!("ALTER ROLE {name} NOLOGIN PASSWORD NULL")).await?;
            changes.push(Change::warning(
                "RoleDisabled",
                format!("role {role} is no longer declared: login and password removed (declare it absent to drop it)"),
            ));
        }
        disabled.push(role);
    }
    Ok(disabled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attributes_say_everything_and_the_password_only_as_its_verifier() {
        let role = Role {
            name: "reader".into(),
            login: true,
            inherit: true,
            connection_limit: 5,
            valid_until: Some("2027-01-01T00:00:00Z".into()),
            verifier: Some("SCRAM-SHA-256$4096:c2FsdA==$a2V5:a2V5".into()),
            ..Role::default()
        };
        assert_eq!(
            attributes(&role).unwrap(),
            "LOGIN INHERIT NOCREATEDB NOCREATEROLE NOSUPERUSER NOREPLICATION NOBYPASSRLS \
             CONNECTION LIMIT 5 VALID UNTIL '2027-01-01T00:00:00Z' \
             PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$a2V5:a2V5'"
        );
        let group = Role {
            name: "readers".into(),
            connection_limit: -1,
            ..Role::default()
        };
        assert!(
            attributes(&group)
                .unwrap()
                .ends_with("CONNECTION LIMIT -1 VALID UNTIL 'infinity' PASSWORD NULL")
        );
    }
}
