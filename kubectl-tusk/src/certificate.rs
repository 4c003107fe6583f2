//! `kubectl tusk certificate`: a client certificate for one of your roles, signed by the
//! cluster's CA, in a Secret of your own. With a `spec.pgHba` rule whose method is `cert`, the
//! role logs in with it and no password. It is signed here, with your credentials (reading
//! Secret `<name>-ca` is what it takes), not by the operator: whoever may run this can read the
//! CA key anyway, and the operator never writes Secrets nobody declared.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use time::{Duration, OffsetDateTime};
use tusk::resources::ca_rotation::CaState;
use tusk::resources::tls::{self, CA_CRT, Lifetimes, TLS_CRT, TLS_KEY, Validity};
use tusk::resources::{CLUSTER_LABEL, Cluster};

use crate::cluster::get_postgresql;
use crate::error::{Error, Result};

/// The roles Tusk keeps for itself: a certificate naming one would be half of its login (the
/// other half, the password, in a Secret the operator owns).
const TUSKS_ROLES: [&str; 4] = ["postgres", "tusk_replication", "tusk_rewind", "tusk_backup"];

/// What was written.
pub struct Issued {
    pub secret: String,
    pub not_after: OffsetDateTime,
    /// When the cluster's CA takes its next rotation step: a certificate signed before it
    /// stops being trusted when the old CA is retired, two steps later.
    pub next_ca_step: OffsetDateTime,
}

/// `at` as RFC 3339, seconds precision (what kubectl prints).
pub fn rfc3339(at: OffsetDateTime) -> String {
    k8s_openapi::jiff::Timestamp::from_second(at.unix_timestamp())
        .map(|t| t.to_string())
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// The Secret's name when none is given: `<cluster>-<role>-tls`, the role's `_` as `-` (a
/// Secret name is a DNS subdomain).
pub fn default_secret_name(cluster: &str, role: &str) -> String {
    format!("{cluster}-{}-tls", role.to_lowercase().replace('_', "-"))
}

/// A role a certificate may name: one of yours, a PostgreSQL identifier as Tusk's specs spell
/// them.
pub fn check_role(role: &str) -> Result<()> {
    if TUSKS_ROLES.contains(&role) {
        return Err(Error::Invalid(format!(
            "{role} is one of Tusk's roles: its logins are the operator's to issue"
        )));
    }
    let mut chars = role.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && role.len() <= 63;
    match valid {
        true => Ok(()),
        false => Err(Error::Invalid(format!(
            "{role:?} is not a role name: lowercase letters, digits and '_', at most 63"
        ))),
    }
}

/// Secret `name` (`kubernetes.io/tls`): the certificate and key, and the CA bundle that
/// verifies the server.
pub fn client_secret(
    cluster: &Cluster,
    name: &str,
    role: &str,
    issued: &tls::Pem,
    bundle: &str,
) -> Secret {
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(cluster.namespace.to_owned()),
            // Labelled for `kubectl tusk report`, never owned: the Secret is yours.
            labels: Some(BTreeMap::from([
                (CLUSTER_LABEL.to_owned(), cluster.name.to_owned()),
                ("tusk.dev/client-role".to_owned(), role.to_owned()),
            ])),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(BTreeMap::from([
            (TLS_CRT.to_owned(), bytes(&issued.cert)),
            (TLS_KEY.to_owned(), bytes(&issued.key)),
            (CA_CRT.to_owned(), bytes(bundle)),
        ])),
        ..Secret::default()
    }
}

/// Signs a certificate for `role` of cluster `name`, valid `days` (never past its CA), and
/// writes it to `secret` (default [`default_secret_name`]). A Secret the operator owns is
/// never written.
pub async fn run(
    client: &Client,
    ns: &str,
    name: &str,
    role: &str,
    secret: Option<String>,
    days: u32,
) -> Result<Issued> {
    check_role(role)?;
    let pg = get_postgresql(client, ns, name).await?;
    let cluster = Cluster::new(&pg).map_err(|e| Error::Invalid(e.to_string()))?;
    if let Some(brought) = cluster.user_server_secret() {
        return Err(Error::Invalid(format!(
            "PostgreSQL {name} serves certificates you bring (Secret {brought}): issue client \
             certificates from the same issuer (cert-manager: a Certificate with usage `client \
             auth` and commonName {role})"
        )));
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let ca_name = cluster.ca_secret_name();
    let stored = secrets
        .get(&ca_name)
        .await
        .map_err(Error::kube(format!("reading Secret {ns}/{ca_name}")))?;
    let ca =
        CaState::read(&stored, &Lifetimes::default()).map_err(|e| Error::Invalid(e.to_string()))?;
    let now = OffsetDateTime::now_utc();
    let until = ca
        .signer_not_after(&cluster)
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let validity = Validity {
        from: now,
        until: (now + Duration::days(days.into())).min(until),
    };
    let issued = tls::issue_client(&cluster, &ca.signer, role, validity)
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let secret_name = secret.unwrap_or_else(|| default_secret_name(name, role));
    if let Some(existing) = secrets
        .get_opt(&secret_name)
        .await
        .map_err(Error::kube(format!("reading Secret {ns}/{secret_name}")))?
        && !existing.owner_references().is_empty()
    {
        return Err(Error::Invalid(format!(
            "Secret {secret_name} is owned by {}: choose another with --secret",
            existing.owner_references()[0].name
        )));
    }
    let written = client_secret(&cluster, &secret_name, role, &issued, &ca.bundle());
    secrets
        .patch(
            &secret_name,
            &PatchParams::apply("kubectl-tusk").force(),
            &Patch::Apply(&written),
        )
        .await
        .map_err(Error::kube(format!("writing Secret {ns}/{secret_name}")))?;
    Ok(Issued {
        secret: secret_name,
        not_after: validity.until,
        next_ca_step: ca.next_step,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tusks_roles_and_names_that_are_not_roles_are_refused() {
        for role in ["reporting", "app", "_etl", "etl_2"] {
            assert!(check_role(role).is_ok(), "{role}");
        }
        for role in TUSKS_ROLES {
            let err = check_role(role).unwrap_err().to_string();
            assert!(err.contains("Tusk's roles"), "{err}");
        }
        for role in ["", "Reporting", "2fast", "a b", &"x".repeat(64)] {
            assert!(check_role(role).is_err(), "{role:?}");
        }
    }

    #[test]
    fn the_default_secret_name_is_a_dns_name() {
        assert_eq!(default_secret_name("demo", "etl_job"), "demo-etl-job-tls");
    }
}
