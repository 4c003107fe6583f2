//! The S3 SDK's HTTPS client, with rustls on `ring`.
//!
//! The SDK's default client is the same hyper 1 + rustls stack on aws-lc-rs; with kube on ring
//! a binary would carry two providers, and rustls then needs one installed by hand before any
//! TLS connection. This builds what the default builds, only with ring.

use aws_sdk_s3::config::SharedHttpClient;
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore, rustls_provider::CryptoMode};
use aws_smithy_http_client::{Builder, ConnectorBuilder};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::store::StoreError;

/// `ca_bundle`: PEM certificates trusted in addition to the platform's roots (a private CA).
pub fn client(ca_bundle: Option<&str>) -> Result<SharedHttpClient, StoreError> {
    let mut trust = TrustStore::default();
    if let Some(pem) = ca_bundle {
        check_bundle(pem)?;
        trust = trust.with_pem_certificate(pem.as_bytes());
    }
    let tls_context = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .map_err(|e| StoreError::config("TLS settings", e))?;
    Ok(
        Builder::new().build_with_connector_fn(move |settings, components| {
            let mut connector =
                ConnectorBuilder::default().tls_provider(tls::Provider::Rustls(CryptoMode::Ring));
            connector.set_tls_context(tls_context.clone());
            connector.set_connector_settings(settings.cloned());
            if let Some(components) = components {
                connector.set_sleep_impl(components.sleep_impl());
            }
            // As the default client does from behavior version 2025-08-07 on (we use the latest):
            // HTTP(S)_PROXY and NO_PROXY are honoured.
            connector.set_proxy_config(Some(ProxyConfig::from_env()));
            connector.build()
        }),
    )
}

/// The SDK panics on a bundle it cannot parse when it first connects: parse it here, so that a
/// wrong bundle is a configuration error naming the problem.
fn check_bundle(pem: &str) -> Result<(), StoreError> {
    let invalid = |problem: String| StoreError::Config(format!("CA bundle: {problem}").into());
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("no PEM certificate in it".to_owned()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("a certificate cannot be used as a CA: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_bundles_are_configuration_errors() {
        for (pem, why) in [
            ("", "no PEM certificate"),
            ("not a certificate", "no PEM certificate"),
            (
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                "cannot be used as a CA",
            ),
        ] {
            let Err(err) = client(Some(pem)) else {
                panic!("{pem:?} accepted");
            };
            assert!(err.to_string().contains(why), "{pem:?}: {err}");
        }
    }
}
