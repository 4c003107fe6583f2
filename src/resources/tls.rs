//! The cluster's own certificate authority and the server certificate PostgreSQL presents.
//!
//! One CA per cluster (ECDSA P-256), its key in Secret `<name>-ca`, which only the operator reads;
//! the server's certificate, key and the CA certificate in Secret `<name>-server-tls`, the only
//! one mounted into the pods. The server certificate names every way a client reaches an
//! instance (the three Services and each pod's headless name, short and qualified), so that
//! `sslmode=verify-full` holds whichever name a client was given. Pure functions: the clock and
//! the cluster domain come in as values.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use time::{Duration, OffsetDateTime};

use super::{Cluster, Component};
use crate::crd::MAX_INSTANCES;

/// Keys of the server Secret (those cert-manager writes) and of the CA Secret.
pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
pub const CA_CRT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
/// The replication role's client certificate and key, in the server Secret beside the server's
/// (mounted with it; renewed with it). Standbys present it; `pg_hba.conf` requires it.
pub const REPLICATION_CRT: &str = "replication.crt";
pub const REPLICATION_KEY: &str = "replication.key";
/// The upgrade role's certificate and key, while an upgrade's new set exists (`upgrade_tls`);
/// the instance manager reads them beside the CA (`tusk-instance`'s `upgrade_target`).
pub const UPGRADE_CRT: &str = "upgrade.crt";
pub const UPGRADE_KEY: &str = "upgrade.key";
/// The role the replication certificate names (its common name, which `clientcert=verify-full`
/// matches against the user name).
pub use tusk_contract::roles::REPLICATION_USER;

/// Default lifetimes. The server's is the shorter, so that a renewal only ever needs the CA that
/// is already trusted; it is renewed once a third of it is left ([`server_renewal_due`]); the
/// CA is rotated with an overlap (`ca_rotation`).
pub const CA_LIFETIME: Duration = Duration::days(10 * 365);
pub const SERVER_LIFETIME: Duration = Duration::days(2 * 365);
/// How long the CA and the leaves (server, replication) live. The defaults are ten and two
/// years; shorter ones exist for tests (`--certificate-lifetimes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    pub ca: Duration,
    pub leaf: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self {
            ca: CA_LIFETIME,
            leaf: SERVER_LIFETIME,
        }
    }
}

impl Lifetimes {
    /// Lifetimes whose rotation schedule holds: a leaf the old CA signs just before step 2
    /// must not outlive the old CA, so a leaf lives at most 7/30 of a CA (1/3 − 1/10).
    pub fn new(leaf: Duration, ca: Duration) -> Result<Self, String> {
        if leaf < Duration::minutes(1) {
            return Err(format!("a leaf lifetime of {leaf} is under a minute"));
        }
        if leaf * 30 > ca * 7 {
            return Err(format!(
                "a leaf lifetime of {leaf} is more than 7/30 of the CA's ({ca}): a leaf signed \
                 by the old CA could outlive it"
            ));
        }
        Ok(Self { ca, leaf })
    }

    /// A leaf is issued again once a third of its life is left.
    pub fn leaf_renewal(&self) -> Duration {
        self.leaf / 3
    }

    /// A CA rotation starts once a third of its life is left.
    pub fn ca_rotation(&self) -> Duration {
        self.ca / 3
    }

    /// How long each rotation step waits before the next.
    pub fn overlap(&self) -> Duration {
        self.ca / 10
    }
}

/// On the server Secret: when its certificate expires (RFC 3339). Renewal and status read it
/// from the cached metadata; the certificate itself is never cached.
pub const NOT_AFTER_ANNOTATION: &str = "tusk.dev/not-after";
/// On the CA, server and credentials Secrets: which CA bundle their `ca.crt` holds (the first
/// 64 bits of its SHA-256, hex; one CA but during a rotation, see `ca_rotation`). The server Secret follows the CA's, the credentials the server's: a
/// reconcile compares the cached annotations, and reads nothing while they agree.
pub const CA_FINGERPRINT_ANNOTATION: &str = "tusk.dev/ca-sha256";
/// Issued slightly in the past: a node whose clock lags must not see a certificate from the future.
const BACKDATE: Duration = Duration::minutes(5);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot issue a certificate for {name}: {source}")]
    Issue { name: String, source: rcgen::Error },
    #[error("Secret {secret} has no usable {key}: {source}")]
    Stored {
        secret: String,
        key: &'static str,
        source: rcgen::Error,
    },
    #[error("Secret {secret} has no readable {key}: {reason}")]
    Unreadable {
        secret: String,
        key: &'static str,
        reason: String,
    },
    #[error("Secret {secret} has no {key}")]
    Missing { secret: String, key: &'static str },
    #[error("Secret {secret}, named by spec.tls.serverSecret, does not exist")]
    Absent { secret: String },
    #[error(
        "Secret {secret}, named by spec.tls.serverSecret, cannot serve this cluster: {problem}"
    )]
    Brought { secret: String, problem: String },
    #[error(
        "Secret {secret} exists and Tusk did not create it for this cluster: a CA made by someone \
         else is not adopted (they would hold its key and could sign a server certificate every \
         client trusts). Delete it to let Tusk issue one, or bring the server certificate with \
         spec.tls.serverSecret"
    )]
    ForeignCa { secret: String },
}

/// What the server Secret carries besides the CA: the server's certificate and the replication
/// role's.
#[derive(Clone, Debug)]
pub struct ServerCertificates {
    pub server: Pem,
    pub replication: Pem,
    /// The upgrade role's, while an upgrade's new set exists (`upgrade_tls`).
    pub upgrade: Option<Pem>,
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// Every DNS name a client may use for this cluster: `-rw`, `-ro`, `-r` and each possible pod's
/// `<pod>.<headless>` (of each set, during an upgrade), each as `x`, `x.<ns>`, `x.<ns>.svc` and `x.<ns>.svc.<domain>`; then
/// `localhost`. All ordinals a spec may reach are named, so scaling up needs no new certificate.
pub fn server_names(cluster: &Cluster, domain: &str) -> Vec<String> {
    let ns = cluster.namespace;
    let headless = cluster.headless_service_name();
    let services = [
        cluster.rw_service_name(),
        cluster.ro_service_name(),
        cluster.any_service_name(),
    ];
    // The serving set's pods, and an upgrade's new set's beside them.
    let headless = &headless;
    let pods = (cluster.sets().into_iter()).flat_map(|set| {
        (0..MAX_INSTANCES).map(move |ordinal| format!("{set}-{ordinal}.{headless}"))
    });
    services
        .into_iter()
        .chain(pods)
        .flat_map(|host| {
            [
                format!("{host}.{ns}.svc.{domain}"),
                format!("{host}.{ns}.svc"),
                format!("{host}.{ns}"),
                host,
            ]
        })
        .chain(["localhost".to_owned()])
        .collect()
}

pub(super) fn issue_error(name: &str) -> impl FnOnce(rcgen::Error) -> TlsError + '_ {
    move |source| TlsError::Issue {
        name: name.to_owned(),
        source,
    }
}

pub(super) fn common_name(name: String) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "Tusk");
    dn.push(DnType::CommonName, name);
    dn
}

fn ca_params(cluster: &Cluster, now: OffsetDateTime, lifetimes: &Lifetimes) -> CertificateParams {
    let mut params = CertificateParams::default();
    // A name of its own for each CA (its issue time): during a rotation two CAs are trusted
    // side by side. Our leaves name their issuer's key too (authority key identifier), but a
    // verifier that picks an issuer by name alone must not find the wrong one (OpenSSL did,
    // with leaves lacking it: "EVP lib").
    let issued = jiff::Timestamp::from_second(now.unix_timestamp()).unwrap_or_default();
    params.distinguished_name = common_name(format!(
        "{}/{} CA {issued}",
        cluster.namespace, cluster.name
    ));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = now - BACKDATE;
    params.not_after = now + lifetimes.ca;
    params
}

/// A new CA for `cluster`.
pub fn issue_ca(
    cluster: &Cluster,
    now: OffsetDateTime,
    lifetimes: &Lifetimes,
) -> Result<Pem, TlsError> {
    let name = cluster.ca_secret_name();
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(issue_error(&name))?;
    let cert = ca_params(cluster, now, lifetimes)
        .self_signed(&key)
        .map_err(issue_error(&name))?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// When a leaf is valid: from just before `from` until `until`.
#[derive(Clone, Copy, Debug)]
pub struct Validity {
    pub from: OffsetDateTime,
    pub until: OffsetDateTime,
}

impl Validity {
    /// A leaf issued at `now`: for its lifetime, never past its signer's expiry.
    pub fn leaf(
        now: OffsetDateTime,
        lifetimes: &Lifetimes,
        signer_not_after: OffsetDateTime,
    ) -> Self {
        Self {
            from: now,
            until: (now + lifetimes.leaf).min(signer_not_after),
        }
    }
}

/// A server certificate for [`server_names`], signed by `ca`.
pub fn issue_server(
    cluster: &Cluster,
    domain: &str,
    ca: &Pem,
    validity: Validity,
) -> Result<Pem, TlsError> {
    let name = cluster.server_tls_secret_name();
    let mut params =
        CertificateParams::new(server_names(cluster, domain)).map_err(issue_error(&name))?;
    params.distinguished_name = common_name(cluster.rw_service_name());
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    issue_leaf(cluster, ca, params, &name, validity)
}

/// The replication role's client certificate ([`REPLICATION_USER`] as its common name), signed
/// by `ca`, valid as the server certificate issued with it.
pub fn issue_replication(cluster: &Cluster, ca: &Pem, validity: Validity) -> Result<Pem, TlsError> {
    let name = format!("{} ({REPLICATION_USER})", cluster.server_tls_secret_name());
    client_leaf(cluster, ca, REPLICATION_USER, &name, validity)
}

/// The superuser's client certificate (`postgres` as its common name), signed by `ca`: a
/// logical restore's, short-lived (`restore_tls`).
pub fn issue_superuser(cluster: &Cluster, ca: &Pem, validity: Validity) -> Result<Pem, TlsError> {
    let name = cluster.restore_tls_secret_name();
    client_leaf(cluster, ca, super::SUPERUSER_NAME, &name, validity)
}

/// A client certificate for role `role` of the cluster (`kubectl tusk certificate`): what a
/// `spec.pgHba` rule with method `cert` (or `clientcert=verify-full`) admits as that role.
pub fn issue_client(
    cluster: &Cluster,
    ca: &Pem,
    role: &str,
    validity: Validity,
) -> Result<Pem, TlsError> {
    client_leaf(
        cluster,
        ca,
        role,
        &format!("a client certificate for {role}"),
        validity,
    )
}

/// A certificate for clients only, naming `role` as its common name (what PostgreSQL compares
/// with the user name).
pub(super) fn client_leaf(
    cluster: &Cluster,
    ca: &Pem,
    role: &str,
    name: &str,
    validity: Validity,
) -> Result<Pem, TlsError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = common_name(role.to_owned());
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    issue_leaf(cluster, ca, params, name, validity)
}

/// A leaf certificate of `params` (its names, subject and purpose), with a new key, signed by
/// `ca`, valid for `validity`. `name` names it in errors.
pub(super) fn issue_leaf(
    cluster: &Cluster,
    ca: &Pem,
    mut params: CertificateParams,
    name: &str,
    validity: Validity,
) -> Result<Pem, TlsError> {
    let issuer = ca_issuer(cluster, ca)?;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    params.not_before = validity.from - BACKDATE;
    params.not_after = validity.until;
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(issue_error(name))?;
    let cert = params.signed_by(&key, &issuer).map_err(issue_error(name))?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The stored CA as an issuer; a CA Secret whose files do not parse is named.
fn ca_issuer(cluster: &Cluster, ca: &Pem) -> Result<Issuer<'static, KeyPair>, TlsError> {
    let stored = |key: &'static str| {
        let secret = cluster.ca_secret_name();
        move |source| TlsError::Stored {
            secret,
            key,
            source,
        }
    };
    let ca_key = KeyPair::from_pem(&ca.key).map_err(stored(CA_KEY))?;
    Issuer::from_ca_cert_pem(&ca.cert, ca_key).map_err(stored(CA_CRT))
}

/// The time `secret` records under `annotation` (RFC 3339), if it records one that parses.
pub fn annotated_time(secret: &Secret, annotation: &str) -> Option<OffsetDateTime> {
    let text = secret.metadata.annotations.as_ref()?.get(annotation)?;
    let at: jiff::Timestamp = text.parse().ok()?;
    OffsetDateTime::from_unix_timestamp(at.as_second()).ok()
}

/// The expiry a server Secret records, if it records one that parses.
pub fn recorded_not_after(secret: &Secret) -> Option<OffsetDateTime> {
    annotated_time(secret, NOT_AFTER_ANNOTATION)
}

/// Whether the server certificate in `secret` must be issued again: less than a third of its
/// life left, or no expiry or CA recorded (a Secret from before the annotations, or one edited),
/// so that a missed reconcile, a slow rollout or a paused operator still renew long before expiry.
pub fn server_renewal_due(secret: &Secret, now: OffsetDateTime, lifetimes: &Lifetimes) -> bool {
    !carries_replication_certificate(secret) || leaf_renewal_due(secret, now, lifetimes)
}

/// Whether the leaf in `secret` (the server's, or the pooler's issued with it) must be issued
/// again: less than a third of its life left, or no expiry or CA recorded.
pub fn leaf_renewal_due(secret: &Secret, now: OffsetDateTime, lifetimes: &Lifetimes) -> bool {
    recorded_ca(secret).is_none()
        || recorded_not_after(secret)
            .is_none_or(|not_after| now >= not_after - lifetimes.leaf_renewal())
}

/// Whether the server Secret carries the replication role's certificate (one issued before it
/// existed does not, and is issued again).
pub fn carries_replication_certificate(secret: &Secret) -> bool {
    secret
        .data
        .as_ref()
        .is_some_and(|data| data.contains_key(REPLICATION_CRT))
}

/// The fingerprint of a CA certificate (PEM), as [`CA_FINGERPRINT_ANNOTATION`] records it.
pub fn ca_fingerprint(ca_cert: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(ca_cert.as_bytes())[..8])
}

/// The CA fingerprint `secret` records, if any.
pub fn recorded_ca(secret: &Secret) -> Option<&str> {
    let annotations = secret.metadata.annotations.as_ref()?;
    annotations
        .get(CA_FINGERPRINT_ANNOTATION)
        .map(String::as_str)
}

pub(super) fn data(entries: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
    entries
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

/// Secret `<name>-server-tls` (`kubernetes.io/tls`, plus `ca.crt`, the replication role's
/// certificate and, during an upgrade, the upgrade role's), mounted by the database pods, its certificate's expiry `not_after` and its
/// CA's fingerprint in annotations.
pub fn server_secret(
    cluster: &Cluster,
    issued: &ServerCertificates,
    ca_cert: &str,
    not_after: OffsetDateTime,
) -> Secret {
    let metadata = cluster.child_meta(cluster.server_tls_secret_name(), Component::Credentials);
    let upgrade = issued.upgrade.as_ref();
    let entries = [
        (TLS_CRT, issued.server.cert.as_str()),
        (TLS_KEY, &issued.server.key),
        (CA_CRT, ca_cert),
        (REPLICATION_CRT, &issued.replication.cert),
        (REPLICATION_KEY, &issued.replication.key),
        // Empty values are left out (`leaf_secret`): no upgrade, no keys.
        (UPGRADE_CRT, upgrade.map_or("", |pem| pem.cert.as_str())),
        (UPGRADE_KEY, upgrade.map_or("", |pem| pem.key.as_str())),
    ];
    leaf_secret(metadata, &entries, ca_cert, not_after)
}

/// A `kubernetes.io/tls` Secret of `entries` whose annotations give its certificate's expiry
/// `not_after` and its CA's fingerprint: how the renewal finds it due (the server's and the
/// pooler's alike).
pub fn leaf_secret(
    mut metadata: ObjectMeta,
    entries: &[(&str, &str)],
    ca_cert: &str,
    not_after: OffsetDateTime,
) -> Secret {
    let at = jiff::Timestamp::from_second(not_after.unix_timestamp()).unwrap_or_default();
    metadata.annotations = Some(BTreeMap::from([
        (NOT_AFTER_ANNOTATION.to_owned(), at.to_string()),
        (
            CA_FINGERPRINT_ANNOTATION.to_owned(),
            ca_fingerprint(ca_cert),
        ),
    ]));
    Secret {
        metadata,
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data(entries)),
        ..Secret::default()
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
