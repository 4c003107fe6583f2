//! The upgrade role's client certificate in the server Secret: an online major-version
//! upgrade's new set reaches the old primary as `tusk_upgrade` with it, and `pg_hba.conf`
//! admits that role by certificate alone (docs/src/design/major-upgrades.md). It is in the
//! Secret exactly while the new set exists beside the serving one, so the server certificate
//! (which names the new set's pods then) is issued again when that starts and when it ends.

use k8s_openapi::api::core::v1::Secret;
use tusk_contract::roles::UPGRADE_USER;

use super::Cluster;
pub use super::tls::UPGRADE_CRT;
use super::tls::{Pem, TlsError, Validity, client_leaf};

/// The upgrade role's certificate, signed by `ca`, valid as the server certificate issued with
/// it; `None` when no upgrade's new set exists.
pub fn issue_upgrade(
    cluster: &Cluster,
    ca: &Pem,
    validity: Validity,
) -> Result<Option<Pem>, TlsError> {
    if cluster.incoming_set.is_none() {
        return Ok(None);
    }
    let name = format!("{} ({UPGRADE_USER})", cluster.server_tls_secret_name());
    client_leaf(cluster, ca, UPGRADE_USER, &name, validity).map(Some)
}

/// Whether the server Secret carries the upgrade certificate.
pub fn carries_upgrade_certificate(secret: &Secret) -> bool {
    (secret.data.as_ref()).is_some_and(|data| data.contains_key(UPGRADE_CRT))
}

/// Whether the server Secret is as the upgrade needs it: the certificate there while the new
/// set exists, and gone after.
pub fn upgrade_certificate_current(cluster: &Cluster, secret: &Secret) -> bool {
    carries_upgrade_certificate(secret) == cluster.incoming_set.is_some()
}
