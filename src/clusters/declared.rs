//! `spec.roles` and `spec.databases` handed to the primary's manager: the generated password
//! Secrets made, every role's password read, Secret `<name>-declared` written when the document
//! differs, and what the manager last reported read back for the status (condition `Declared`).
//! A cluster that declares nothing and never did costs nothing: no read, no write.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use tusk_contract::declared::{ObjectState, secret_name};

use super::ha::PrimaryState;
use super::ha::pods::{cluster_pods, read_report};
use crate::crd::conditions::DECLARED;
use crate::crd::{DeclaredDatabase, DeclaredObject, DeclaredRole};
use crate::error::{Error, Result};
use crate::resources::declared::{
    PasswordSource, declared_secret, document, generated_role_secret, password_source,
    stored_document,
};
use crate::resources::{Cluster, generate_password, password_of};
use crate::runtime::Context;
use crate::runtime::apply::{Change, Written, apply, create};
use crate::runtime::conditions::Update;

/// While the manager has not reported every declared object as kept, the status looks again
/// this soon; a failure is retried by the manager every few seconds, and looked at this often.
pub const PENDING_RECHECK: Duration = Duration::from_secs(5);
pub const FAILED_RECHECK: Duration = Duration::from_secs(30);
/// Without a report on the current declaration from the primary's manager: it keeps a new one
/// within seconds (or none serves, or it does not answer).
pub const NO_REPORT_RECHECK: Duration = Duration::from_secs(5);
/// A Secret the user names for a role is not watched: read again at least this often.
pub const NAMED_SECRET_RECHECK: Duration = Duration::from_secs(60);

/// What this reconcile did and learned.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Declared {
    /// Nothing declared, now or before.
    #[default]
    Nothing,
    /// The document could not be made (a role's Secret lacks its password): not written.
    Waiting(String),
    /// Written or unchanged; the manager's report of each object, if it answered.
    Handed {
        /// The manager's report, if it answered and reported on this very declaration.
        report: Option<Vec<ObjectState>>,
        named_secrets: bool,
    },
}

/// Hands the declaration over; returns what it wrote.
pub async fn hand_over(
    cluster: &Cluster<'_>,
    primary: &PrimaryState,
    ctx: &Context,
) -> Result<(Declared, Vec<Written>)> {
    let spec = cluster.spec;
    let ns = cluster.namespace;
    let name = secret_name(cluster.name);
    let secrets = &ctx.caches.secrets;
    let nothing = spec.roles.is_empty() && spec.databases.is_empty() && spec.pooler.is_none();
    if nothing && secrets.get(ns, &name).is_none() {
        return Ok((Declared::Nothing, Vec::new()));
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let mut writes = Vec::new();
    let mut passwords = BTreeMap::new();
    let mut named_secrets = false;
    for role in &spec.roles {
        let source = password_source(cluster, role);
        named_secrets |= matches!(source, PasswordSource::Named(_));
        let Some(secret) = source.secret() else {
            continue;
        };
        if matches!(source, PasswordSource::Generated(_)) && secrets.get(ns, secret).is_none() {
            let password = generate_password();
            let wanted = generated_role_secret(cluster, &role.name, &password);
            if create(&api, &wanted).await? == Change::Created {
                writes.extend(Written::of(&wanted, Change::Created));
                passwords.insert(role.name.clone(), password);
                continue;
            }
        }
        if let Some(password) = read(&api, secret).await?.as_ref().and_then(password_of) {
            passwords.insert(role.name.clone(), password);
        }
    }
    let stored = read(&api, &name).await?;
    let previous = stored.as_ref().and_then(stored_document);
    let wanted = match document(
        cluster,
        &spec.roles,
        &spec.databases,
        &passwords,
        previous.as_ref(),
    ) {
        Ok(wanted) => wanted,
        Err(missing) => return Ok((Declared::Waiting(missing.to_string()), writes)),
    };
    if previous.as_ref() != Some(&wanted) {
        let secret = declared_secret(cluster, &wanted);
        let change = match stored {
            None => create(&api, &secret).await?,
            Some(_) => {
                apply(&api, None, secret.clone()).await?;
                Change::Updated
            }
        };
        writes.extend(Written::of(&secret, change));
    }
    let json = serde_json::to_vec(&wanted).unwrap_or_default();
    let digest = tusk_contract::declared::digest(&json);
    let report = match primary.current.as_deref() {
        Some(current) => read_report(ctx, cluster, &cluster_pods(ctx, cluster), current)
            .await
            .filter(|r| r.declared_digest.as_deref() == Some(digest.as_str()))
            .map(|r| r.declared),
        None => None,
    };
    let declared = Declared::Handed {
        report,
        named_secrets,
    };
    Ok((declared, writes))
}

async fn read(api: &Api<Secret>, name: &str) -> Result<Option<Secret>> {
    api.get_opt(name).await.map_err(|source| Error::Read {
        kind: "Secret".to_owned(),
        name: name.to_owned(),
        source,
    })
}

/// What the status says of the declaration: the list (None: as it was), the condition (None:
/// removed, with the list) and how soon to look again.
pub struct DeclaredStatus {
    pub objects: Option<Vec<DeclaredObject>>,
    pub condition: Option<Update<'static>>,
    pub recheck: Option<Duration>,
}

/// The status for `declared`, from the spec's lists and the manager's report.
pub fn status(
    roles: &[DeclaredRole],
    databases: &[DeclaredDatabase],
    declared: &Declared,
) -> DeclaredStatus {
    let condition = |status: bool, reason: &'static str, message: String| Update {
        type_: DECLARED,
        status,
        reason,
        message,
    };
    let wanted = roles
        .iter()
        .map(|r| ("role", r.name.as_str()))
        .chain(databases.iter().map(|d| ("database", d.name.as_str())));
    let (report, named_secrets) = match declared {
        Declared::Nothing => {
            return DeclaredStatus {
                objects: Some(Vec::new()),
                condition: None,
                recheck: None,
            };
        }
        Declared::Waiting(message) => {
            return DeclaredStatus {
                objects: None,
                condition: Some(condition(false, "PasswordMissing", message.clone())),
                recheck: Some(NAMED_SECRET_RECHECK),
            };
        }
        Declared::Handed { report: None, .. } => {
            return DeclaredStatus {
                objects: None,
                condition: Some(condition(
                    false,
                    "Pending",
                    "the primary's manager has not reported on this declaration yet".to_owned(),
                )),
                // Not kept yet (seconds after a change), or the primary's manager does not
                // answer (a failover, a pod starting).
                recheck: Some(NO_REPORT_RECHECK),
            };
        }
        Declared::Handed {
            report: Some(report),
            named_secrets,
            ..
        } => (report, *named_secrets),
    };
    let reported = |kind: &str, name: &str| {
        report
            .iter()
            .find(|o| o.kind == kind && o.name == name)
            .map(|o| (o.state.clone(), o.message.clone()))
    };
    let mut objects: Vec<DeclaredObject> = wanted
        .map(|(kind, name)| {
            let (state, message) =
                reported(kind, name).unwrap_or_else(|| ("Pending".to_owned(), None));
            DeclaredObject {
                kind: kind.to_owned(),
                name: name.to_owned(),
                state,
                message,
            }
        })
        .collect();
    // Roles Tusk made that are no longer declared, as the manager left them.
    objects.extend(
        report
            .iter()
            .filter(|o| o.state == "Disabled" && !roles.iter().any(|r| r.name == o.name))
            .map(|o| DeclaredObject {
                kind: o.kind.clone(),
                name: o.name.clone(),
                state: o.state.clone(),
                message: None,
            }),
    );
    let failed: Vec<String> = objects
        .iter()
        .filter(|o| o.state == "Failed")
        .map(|o| {
            let why = o.message.as_deref().unwrap_or("no reason given");
            format!("{} {}: {why}", o.kind, o.name)
        })
        .collect();
    let pending = objects.iter().filter(|o| o.state == "Pending").count();
    let (condition, recheck) = if !failed.is_empty() {
        let message = failed.join("; ");
        (
            condition(false, "DeclarationFailed", message),
            Some(FAILED_RECHECK),
        )
    } else if pending > 0 {
        let message = format!("{pending} declared objects not kept yet on the primary");
        (condition(false, "Pending", message), Some(PENDING_RECHECK))
    } else {
        let message = format!(
            "{} roles and {} databases as declared",
            roles.len(),
            databases.len()
        );
        let recheck = named_secrets.then_some(NAMED_SECRET_RECHECK);
        (condition(true, "Kept", message), recheck)
    };
    DeclaredStatus {
        objects: Some(objects),
        condition: Some(condition),
        recheck,
    }
}

#[cfg(test)]
#[path = "declared_tests.rs"]
mod tests;
