//! The cluster's certificates in the converged world: its CA Secret, and what the status shows
//! of them.

use k8s_openapi::api::core::v1::Secret;
use tusk::PostgreSQL;
use tusk::resources::ca_rotation::CaState;
use tusk::resources::tls;

use super::world::Cache;

/// What the operator's status shows of the certificates `cache` holds.
pub fn certificate_times(cache: &Cache) -> Option<tusk::crd::CertificateTimes> {
    let named = |name: &str| {
        cache
            .secrets
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))
    };
    tusk::resources::ca_rotation::certificate_times(named("demo-server-tls"), named("demo-ca"))
}

/// `pg` with the status's certificate times of `cache` (after a test edited its Secrets).
pub fn with_certificate_times(mut pg: PostgreSQL, cache: &Cache) -> PostgreSQL {
    if let Some(status) = pg.status.as_mut() {
        status.certificates = certificate_times(cache);
    }
    pg
}

/// Secret `<name>-ca` holding `ca` alone, its rotation years away.
pub fn steady_ca_secret(cluster: &tusk::resources::Cluster, ca: &tls::Pem) -> Secret {
    let state = CaState {
        signer: ca.clone(),
        next: None,
        previous: None,
        next_step: time::OffsetDateTime::now_utc() + tls::CA_LIFETIME / 2,
    };
    state.secret(cluster)
}
