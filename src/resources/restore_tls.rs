//! Secret `<name>-restore-tls`: the superuser's client certificate for a logical restore Job
//! (issue 47). Outside a restore the superuser does not log in over the network at all (unless
//! `spec.superuserAccess`); with Tusk's own CA, `pg_hba.conf` lets it in with its password *and*
//! a certificate of the CA naming `postgres`, which only this Secret holds. It lives as long as
//! the restore Job may run, and an hour more.

use k8s_openapi::api::core::v1::Secret;
use time::{Duration, OffsetDateTime};

use super::ca_rotation::CaState;
use super::tls::{self, TLS_CRT, TLS_KEY, TlsError, Validity};
use super::{Cluster, Component};

/// Beyond the Job's deadline: the pod may wait for a node, its image, the database.
const MARGIN: Duration = Duration::hours(1);

/// How long a restore certificate issued at `now` lives: the Job's deadline and a margin, never
/// past the CA's own expiry.
pub fn validity(
    now: OffsetDateTime,
    deadline_seconds: i64,
    ca_not_after: OffsetDateTime,
) -> Validity {
    Validity {
        from: now,
        until: (now + Duration::seconds(deadline_seconds) + MARGIN).min(ca_not_after),
    }
}

/// The Secret, with a certificate signed by `ca`'s signer, valid for `deadline_seconds` (the
/// restore Job's) and [`MARGIN`].
pub fn restore_tls_secret(
    cluster: &Cluster,
    ca: &CaState,
    now: OffsetDateTime,
    deadline_seconds: i64,
) -> Result<Secret, TlsError> {
    let validity = validity(now, deadline_seconds, ca.signer_not_after(cluster)?);
    let issued = tls::issue_superuser(cluster, &ca.signer, validity)?;
    Ok(Secret {
        metadata: cluster.child_meta(cluster.restore_tls_secret_name(), Component::Restore),
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(tls::data(&[
            (TLS_CRT, &issued.cert),
            (TLS_KEY, &issued.key),
        ])),
        ..Secret::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ca_rotation::Lifetimes;
    use crate::resources::fixtures::*;

    #[test]
    fn the_certificate_names_the_superuser_for_clients_only_and_lives_as_long_as_the_job() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let ca = CaState::issue(&cluster, now, &Lifetimes::default()).unwrap();
        let secret = restore_tls_secret(&cluster, &ca, now, 3600).unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-restore-tls"));
        let data = secret.data.unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), [TLS_CRT, TLS_KEY]);
        let (_, pem) = x509_parser::pem::parse_x509_pem(&data[TLS_CRT].0).unwrap();
        let cert = pem.parse_x509().unwrap();
        let cn = cert.subject().iter_common_name().next().unwrap();
        assert_eq!(cn.as_str().unwrap(), "postgres");
        let usage = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(usage.client_auth && !usage.server_auth);
        let lives = cert.validity().not_after.timestamp() - now.unix_timestamp();
        assert_eq!(lives, 3600 + 3600, "the deadline and an hour");
    }

    #[test]
    fn it_never_outlives_its_ca() {
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let ca_end = now + Duration::minutes(30);
        assert_eq!(validity(now, 12 * 3600, ca_end).until, ca_end);
    }
}
