//! Secret `<name>-pooler-tls`: one certificate of the cluster's CA that PgBouncer presents on
//! both sides: to clients as `<name>-pooler-rw` (server authentication), and to PostgreSQL as
//! role `tusk_pooler` (client authentication, its common name), which `pg_hba.conf` admits by
//! certificate alone to run the pooler's password lookup. The pooler never holds the server's
//! key. Issued, renewed and re-signed with the server's certificate, so it follows every CA
//! rotation step with it.

use k8s_openapi::api::core::v1::Secret;
use rcgen::{CertificateParams, ExtendedKeyUsagePurpose};
use time::OffsetDateTime;

use super::tls::{
    CA_CRT, Pem, TLS_CRT, TLS_KEY, TlsError, Validity, common_name, issue_error, issue_leaf,
    leaf_secret,
};
use super::{Cluster, Component};

/// The role PgBouncer looks passwords up as (`auth_user`); its certificate's common name.
pub use tusk_contract::roles::POOLER_USER;

/// The names clients dial the poolers by: `<name>-pooler-rw` and `<name>-pooler-ro`, short and
/// qualified (one certificate serves both).
pub fn pooler_names(cluster: &Cluster, domain: &str) -> Vec<String> {
    let ns = cluster.namespace;
    let mut names = Vec::new();
    for host in [cluster.pooler_rw_service_name(), cluster.pooler_ro_name()] {
        names.extend([
            format!("{host}.{ns}.svc.{domain}"),
            format!("{host}.{ns}.svc"),
            format!("{host}.{ns}"),
            host,
        ]);
    }
    names.push("localhost".to_owned());
    names
}

/// The pooler's certificate, signed by `ca`.
pub fn issue_pooler(
    cluster: &Cluster,
    domain: &str,
    ca: &Pem,
    validity: Validity,
) -> Result<Pem, TlsError> {
    let name = cluster.pooler_tls_secret_name();
    let mut params =
        CertificateParams::new(pooler_names(cluster, domain)).map_err(issue_error(&name))?;
    params.distinguished_name = common_name(POOLER_USER.to_owned());
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    issue_leaf(cluster, ca, params, &name, validity)
}

/// Secret `<name>-pooler-tls` with `issued`, the CA bundle and the same annotations as the
/// server's (expiry, CA fingerprint), so that both are found due together.
pub fn pooler_tls_secret(
    cluster: &Cluster,
    issued: &Pem,
    ca_cert: &str,
    not_after: OffsetDateTime,
) -> Secret {
    let metadata = cluster.child_meta(cluster.pooler_tls_secret_name(), Component::Pooler);
    let entries = [
        (TLS_CRT, issued.cert.as_str()),
        (TLS_KEY, &issued.key),
        (CA_CRT, ca_cert),
    ];
    leaf_secret(metadata, &entries, ca_cert, not_after)
}
