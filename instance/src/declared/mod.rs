//! The roles and databases the cluster's spec declares (`tusk_contract::declared`), kept on the
//! primary every few seconds: each object on its own, so one that fails (a role that owns
//! objects and is declared absent, an extension the image lacks) is reported and retried while
//! the rest are kept. Roles first, then memberships (a declared role may join another), then
//! databases (a declared role may own one). Without a declaration nothing is touched.

mod databases;
pub mod pooler_access;
mod roles;
pub mod source;

use std::collections::BTreeSet;

use tusk_contract::declared::{Document, ObjectState};

use crate::context::Context;
use crate::error::Error;

pub use source::{Source, spawn};

/// One object's result: its state (`Ready`, `Absent`), or why it failed, in the server's words.
type Outcome = Result<&'static str, String>;

/// Something a pass changed, for an Event on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

impl Change {
    fn normal(reason: &'static str, note: String) -> Self {
        Self {
            warning: false,
            reason,
            note,
        }
    }
    fn warning(reason: &'static str, note: String) -> Self {
        Self {
            warning: true,
            reason,
            note,
        }
    }
}

/// What one pass found and did.
#[derive(Debug, Default)]
pub struct Pass {
    pub states: Vec<ObjectState>,
    pub changes: Vec<Change>,
}

/// Keeps `document` on the local primary, in a session that logs no statement (passwords
/// travel as verifiers, but a verifier is still not for the log).
pub async fn keep(ctx: &Context, document: &Document) -> Result<Pass, Error> {
    let client = crate::roles::silent_session(ctx).await?;
    let mut pass = Pass::default();
    let mut role_outcomes = Vec::new();
    for role in &document.roles {
        let outcome = match reserved(ctx, &role.name) {
            true => Err(format!("{} is a role Tusk keeps itself", role.name)),
            false => roles::keep(&client, role, &mut pass.changes).await,
        };
        role_outcomes.push(outcome);
    }
    for (role, outcome) in document.roles.iter().zip(role_outcomes.iter_mut()) {
        if outcome.is_ok() {
            *outcome = roles::keep_memberships(&client, role, &mut pass.changes).await;
        }
    }
    for (role, outcome) in document.roles.iter().zip(role_outcomes) {
        pass.states.push(state("role", &role.name, outcome));
    }
    let declared: BTreeSet<&str> = document.roles.iter().map(|r| r.name.as_str()).collect();
    match roles::disable_undeclared(&client, &declared, &mut pass.changes).await {
        Ok(disabled) => pass.states.extend(
            disabled
                .into_iter()
                .map(|role| state("role", &role, Ok("Disabled"))),
        ),
        Err(message) => pass.states.push(state("role", "*", Err(message))),
    }
    for database in &document.databases {
        let outcome = databases::keep(ctx, &client, database, &mut pass.changes).await;
        pass.states.push(state("database", &database.name, outcome));
    }
    // After the databases: a database declared in this pass gets its lookup in this pass.
    if let Err(message) =
        pooler_access::keep(ctx, &client, document.pooler, &mut pass.changes).await
    {
        pass.states
            .push(state("pooler", "tusk_pooler", Err(message)));
    }
    Ok(pass)
}

/// Roles no declaration may name (the spec's rules refuse them too): the superuser, Tusk's
/// machine roles, PostgreSQL's own and the bootstrap owner, whose password is `<name>-app`'s.
fn reserved(ctx: &Context, role: &str) -> bool {
    role == "postgres"
        || role.starts_with("pg_")
        || role.starts_with("tusk_")
        || ctx.args.app_user.as_deref() == Some(role)
}

fn state(kind: &str, name: &str, outcome: Outcome) -> ObjectState {
    let (state, message) = match outcome {
        Ok(state) => (state.to_owned(), None),
        Err(message) => ("Failed".to_owned(), Some(message)),
    };
    ObjectState {
        kind: kind.to_owned(),
        name: name.to_owned(),
        state,
        message,
    }
}

/// Runs `sql`; a failure in the server's own words.
async fn execute(client: &tokio_postgres::Client, sql: &str) -> Result<(), String> {
    client.batch_execute(sql).await.map_err(server_message)
}

/// The server's own message (and detail) of a failed statement, without the client's framing.
fn server_message(error: tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {detail}", db.message()),
            None => db.message().to_owned(),
        },
        None => error.to_string(),
    }
}
