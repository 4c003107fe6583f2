//! The superuser's and the app owner's passwords as their Secrets declare them: the operator
//! puts each password's SCRAM verifier in Secret `<name>-verifiers`, mounted here one file per
//! role, and the primary's manager makes the role's password the declared one whenever they
//! differ (a Secret changed by the user, or a password changed by hand in SQL, which is put
//! back). Verifiers only reach this pod: no password of these roles is in a file here.

use std::path::Path;

use tusk_contract::roles::{APP_VERIFIER_FILE, SUPERUSER_VERIFIER_FILE};

use crate::context::Context;
use crate::error::Error;
use crate::sql::{quote_ident, quote_literal};

/// A verifier as PostgreSQL stores it: `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`,
/// base64 in between. Anything else in the file is refused (the server would otherwise take
/// it as a plaintext password and hash it).
pub fn is_scram_verifier(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("SCRAM-SHA-256$") else {
        return false;
    };
    let Some((iterations_salt, keys)) = rest.split_once('$') else {
        return false;
    };
    let base64 = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
    };
    let pair = |s: &str, first: &dyn Fn(&str) -> bool| {
        s.split_once(':')
            .is_some_and(|(a, b)| first(a) && base64(b))
    };
    pair(iterations_salt, &|i: &str| {
        !i.is_empty() && i.chars().all(|c| c.is_ascii_digit())
    }) && pair(keys, &base64)
}

/// What a role's password is made from at the first start and after a restore: the declared
/// verifier when the pod mounts one (the operator's pods: no password of these roles reaches
/// them), else the password from the environment (tests, and pods of an older operator).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    Verifier(String),
    Password(String),
}

impl Credential {
    /// What `ALTER ROLE … PASSWORD` and initdb's password file take: a verifier as it is (the
    /// server stores a SCRAM verifier unchanged), a password as a new verifier of it.
    pub fn verifier(&self) -> String {
        match self {
            Self::Verifier(verifier) => verifier.clone(),
            Self::Password(password) => {
                postgres_protocol::password::scram_sha_256(password.as_bytes())
            }
        }
    }
}

/// The superuser's credential; an error when there is neither.
pub fn superuser(ctx: &Context) -> Result<Credential, Error> {
    let file = ctx.args.verifiers_dir.join(SUPERUSER_VERIFIER_FILE);
    match (declared(&file)?, &ctx.args.postgres_password) {
        (Some(verifier), _) => Ok(Credential::Verifier(verifier)),
        (None, Some(password)) => Ok(Credential::Password(password.clone())),
        (None, None) => Err(Error::Config(format!(
            "no superuser password: neither {} nor POSTGRES_PASSWORD",
            file.display()
        ))),
    }
}

/// The app owner's credential, if the cluster has an app owner and either is given.
pub fn app(ctx: &Context) -> Result<Option<Credential>, Error> {
    let file = ctx.args.verifiers_dir.join(APP_VERIFIER_FILE);
    Ok(match (declared(&file)?, &ctx.args.app_password) {
        (Some(verifier), _) => Some(Credential::Verifier(verifier)),
        (None, Some(password)) => Some(Credential::Password(password.clone())),
        (None, None) => None,
    })
}

/// The roles whose declared verifier differs from the server's, made equal; returns their
/// names. The verifiers come from `watched` (Secret `<cluster>-verifiers` as the API shows it)
/// when the manager follows it, else from the mounted files. A missing file (a pod from
/// before the verifiers) declares nothing.
pub async fn keep(
    ctx: &Context,
    client: &tokio_postgres::Client,
    watched: Option<&std::collections::BTreeMap<String, k8s_openapi::ByteString>>,
) -> Result<Vec<String>, Error> {
    let mut changed = Vec::new();
    let slots = [
        (SUPERUSER_VERIFIER_FILE, Some("postgres")),
        (APP_VERIFIER_FILE, ctx.args.app_user.as_deref()),
    ];
    for (file, role) in slots {
        let Some(role) = role else {
            continue;
        };
        let verifier = match watched {
            Some(data) => data
                .get(file)
                .and_then(|bytes| std::str::from_utf8(&bytes.0).ok())
                .map(str::trim)
                .filter(|text| is_scram_verifier(text))
                .map(str::to_owned),
            None => declared(&ctx.args.verifiers_dir.join(file))?,
        };
        let Some(verifier) = verifier else {
            continue;
        };
        let stored = client
            .query_opt(
                "SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1",
                &[&role],
            )
            .await
            .map_err(Error::sql(format!("reading role {role}'s password")))?;
        let current: Option<String> = match stored {
            // The role does not exist yet: the first start makes it.
            None => continue,
            Some(row) => row.get(0),
        };
        if current.as_deref() == Some(verifier.as_str()) {
            continue;
        }
        let sql = format!(
            "ALTER ROLE {} PASSWORD {}",
            quote_ident(role)?,
            quote_literal(&verifier)?
        );
        client
            .batch_execute(&sql)
            .await
            .map_err(Error::sql(format!("ALTER ROLE {role}")))?;
        changed.push(role.to_owned());
    }
    Ok(changed)
}

/// The verifier in `path`, if the file exists and holds one.
fn declared(path: &Path) -> Result<Option<String>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()))(e)),
    };
    let verifier = text.trim();
    if !is_scram_verifier(verifier) {
        tracing::warn!(file = %path.display(), "not a SCRAM-SHA-256 verifier: ignored");
        return Ok(None);
    }
    Ok(Some(verifier.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_scram_verifier_is_declared() {
        let made = postgres_protocol::password::scram_sha_256(b"s3cret");
        assert!(is_scram_verifier(&made), "{made}");
        for text in [
            "s3cret",
            "",
            "SCRAM-SHA-256$",
            "SCRAM-SHA-256$4096:salt",
            "SCRAM-SHA-256$x:c2FsdA==$a:b",
            "SCRAM-SHA-256$4096:c2FsdA==$a:b'; DROP ROLE app; --",
            "md5abcdef",
        ] {
            assert!(!is_scram_verifier(text), "{text:?}");
        }
    }
}
